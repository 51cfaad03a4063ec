"""A turn whose store fails: held, and ended as soon as the store takes writes again.

A write that fails (disk full, the database gone or restarting) leaves the runner unable to
end the turn the usual way, since ending it is a write too. ``hold_until_stored`` tells the
turn's listeners at once and then retries until the turn's end is stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..blocks import Turn, TurnStatus
from ..errors import StoreWriteError, TurnTakenOver
from ..events import ErrorEvent
from ..lifecycle import EventSink, TurnRecorder
from ..store.protocol import Store

log = logging.getLogger("turnstream.loop")  # the loop's log, as before the phases had modules of their own

CANCELLED = "Not run: the turn was cancelled before this call finished."
STORE_FAILED = ("No result: the turn could not be stored ({reason}), so it ended here. "
                "The call may have run.")
STORE_RETRY_MAX = 2.0
"""Longest wait, in seconds, between attempts to end a turn whose writes fail (disk full,
database gone): the turn is held, and ended as soon as the store takes writes again."""


async def hold_until_stored(store: Store, rec: TurnRecorder, exc: StoreWriteError, *, steps: int,
                            on_event: EventSink | None, absorb_cancel: Callable[[], bool]) -> Turn:
    """A write of the turn failed. The turn is held: its listeners (``on_event``) are told
    at once (a live ``error`` event, not stored: the store is what fails), and the turn is
    ended ``failed`` from what the store holds as soon as the store takes writes again (what
    was streaming and not stored is dropped, calls without a stored result get an error
    result). A cancel while it waits that ``absorb_cancel`` takes for the turn's own (it then
    uncancels the task) makes it end ``cancelled`` instead; any other cancel is raised. The
    wait ends only when the turn has ended, or is gone."""
    turn_id = rec.turn_id
    cause = exc.__cause__ or exc
    reason = f"{type(cause).__name__}: {cause}".strip()
    err = ErrorEvent(code="store_error", message=f"the turn could not be stored: {reason}", retryable=True)
    if on_event is not None:
        rec.n += 1
        on_event(ErrorEvent(code="store_unavailable", retryable=True, turn_id=turn_id, n=rec.n,
                            message="the database does not take writes now; this turn is held and "
                                    "ends as soon as it does"))
    status: TurnStatus = "failed"
    delay = 0.05
    while True:
        try:
            turn = await store.get_turn(turn_id)
            if turn is None:
                raise exc  # the turn is gone (its session was deleted meanwhile)
            if turn.status != "running":  # its end was stored after all
                rec.turn = turn
                return turn
            rec.blocks = list(turn.blocks)  # a block whose write failed may be missing
            rec.n = max(rec.n, await store.last_event_n(turn_id))
            if status == "cancelled":
                return await rec.close_out(CANCELLED, "cancelled", None, steps=steps)
            return await rec.close_out(STORE_FAILED.format(reason=reason), "failed", err, steps=steps)
        except asyncio.CancelledError:
            if not absorb_cancel():
                raise
            status = "cancelled"
            continue
        except TurnTakenOver:
            raise
        except Exception as again:  # the store still fails (a driver error, a closed pool)
            log.info("turn %s: the store still fails (%s: %s); retrying", turn_id, type(again).__name__, again)
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            if not absorb_cancel():
                raise
            status = "cancelled"
        delay = min(delay * 2, STORE_RETRY_MAX)


__all__ = ["CANCELLED", "STORE_FAILED", "STORE_RETRY_MAX", "hold_until_stored"]
