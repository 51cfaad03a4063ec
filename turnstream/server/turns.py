"""``TurnManager``: the turns this process drives, each in its own task.

A turn runs in a task of its own, never in the request that started it, so a client that
disconnects stops only its listener. The runner's ``on_event`` publishes every event to
the bus; listeners follow a turn through ``follow.follow`` (store first, then live).

Which process drives a turn: the one that received the message, or, after a pause for the
client, the one that received the last tool result (``claim_turn`` makes sure exactly one
does). A cancel for a turn driven elsewhere goes over the bus.

Turns whose process died: every ``sweep_interval`` seconds (and when a cancel or a new
message finds the session's turn open) the manager asks the store which runners are gone
(``Store.dead_runners``: their liveness lock is free) and adopts their running turns;
each one is taken over (``TurnRunner.take_over``: it continues where the store says it
stood) or, with ``takeover="interrupt"``, ended ``interrupted`` through the close-out.

Shutting down (``drain``): new turns are refused (503), running ones get a grace period to
finish, and the rest are abandoned, not ended: they stay ``running`` and another process,
or the next start, takes them over once this one has closed its store.

Safety net: when a driving task ends without the runner having finished the turn (a bug,
a store that kept failing), the turn is closed here through the same close-out
(``lifecycle.close_out_stored``): dangling tool calls get ``is_error`` results and
``turn_complete`` is written, so no listener waits forever and the session can take its
next message. Cancelling is ``TurnRunner.cancel()``, for a turn running here, and the same
close-out for a turn that waits for the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..aio import shielded
from ..blocks import Attachment, Session
from ..bus import Bus, Subscription
from ..errors import ShuttingDown, TurnConflictError, TurnNotWaiting, TurnTakenOver
from ..events import ErrorEvent, StreamEvent, TurnStart
from ..lifecycle import close_out_stored
from ..loop import CANCELLED, RunConfig, TurnRunner
from ..store import Store
from ..transcript import INTERRUPTED_RESULT
from .admission import Admission

log = logging.getLogger("turnstream.server.turns")

FAILED = "Not run: the turn failed before this call finished ({reason})."
CANCEL_WAIT = 5.0
"""Seconds a cancel request waits for the turn to end before it answers ``cancelling``."""


@dataclass(slots=True, eq=False)
class _Live:
    runner: TurnRunner
    session_id: str
    task: asyncio.Task[None] | None = None
    cancelled: bool = False
    abandoned: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)


class TurnManager:
    def __init__(self, store: Store, bus: Bus, config_for: Callable[[Session], RunConfig], *,
                 admission: Admission | None = None, takeover: str = "continue", sweep_interval: float = 1.0,
                 stale_after: float | None = None) -> None:
        self.store = store
        self.bus = bus
        self.config_for = config_for
        self.admission = admission or Admission(max_lag=0)
        """Holds new turns back while the event loop runs late (admission.py); off by default."""
        self.takeover = takeover
        """``continue`` (a dead process's turns go on here) or ``interrupt`` (they end)."""
        self.sweep_interval = sweep_interval
        self.stale_after = stale_after
        """A runner that has not beaten for this long counts as gone too (a hung process)."""
        self._live: dict[str, _Live] = {}
        self._running: set[_Live] = set()
        """Every driving task's record, also before its turn id is known."""
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_lock = asyncio.Lock()
        self._next: asyncio.Task[None] | None = None
        """The last task that starts a turn from queued messages (kept so it is not collected)."""
        self.draining = False
        bus.on_control = self._on_control

    @property
    def live_count(self) -> int:
        return len(self._live)

    def is_live(self, turn_id: str) -> bool:
        return turn_id in self._live

    # starting ----------------------------------------------------------------------------
    async def start(self, session: Session, message: str, client_tools: list[dict[str, Any]] | None = None, *,
                    attachments: Sequence[Attachment] = (),
                    parent_turn_id: str | None = None) -> tuple[str, Subscription]:
        """Start a turn; return its id and a subscription that has every event from the
        first. Raises ``TurnConflictError`` when the session has an open turn (after making
        sure its process is alive: a dead one's turn is taken over, or ended, first),
        ``Overloaded`` when the turn could not be admitted in time, ``ShuttingDown`` while the
        server stops. ``parent_turn_id``: as for ``TurnRunner.run`` (docs/branches.md)."""
        try:
            return await self._start(session, message, client_tools, attachments, parent_turn_id)
        except TurnConflictError as exc:
            if exc.turn_id not in await self.sweep():
                raise
            # ended there (interrupt mode)
            return await self._start(session, message, client_tools, attachments, parent_turn_id)

    async def _start(self, session: Session, message: str, client_tools: list[dict[str, Any]] | None,
                     attachments: Sequence[Attachment], parent_turn_id: str | None) -> tuple[str, Subscription]:
        if self.draining:
            raise ShuttingDown()
        await self.admission.admit()
        try:
            config = self.config_for(session)
        except BaseException:
            self.admission.release()
            raise
        loop = asyncio.get_running_loop()
        sub = self.bus.subscription()
        ready: asyncio.Future[str] = loop.create_future()
        live: _Live | None = None

        def on_event(ev: StreamEvent) -> None:
            if type(ev) is TurnStart:
                # Attached before the event is published, in the runner's own task: the
                # subscription misses nothing, deltas included.
                # Its runner is here: no other process's events are needed.
                self.bus.attach(sub, "turn", ev.turn_id, session.id, remote=False)
                assert live is not None
                self._live[ev.turn_id] = live
                if not ready.done():
                    ready.set_result(ev.turn_id)
            self.bus.publish(session.id, ev)

        runner = TurnRunner(config, self.store, on_event=on_event)
        live = _Live(runner, session.id)
        task = self._spawn(live, runner.run(session.id, message, client_tools=client_tools,
                                            attachments=attachments, parent_turn_id=parent_turn_id))

        def on_done(t: asyncio.Task[None]) -> None:
            self.admission.release()
            if not ready.done():
                exc = None if t.cancelled() else t.exception()
                ready.set_exception(exc or RuntimeError("the turn ended before it started"))

        task.add_done_callback(on_done)
        try:
            turn_id = await asyncio.shield(ready)
        except BaseException:
            sub.close()
            raise
        return turn_id, sub

    async def resume(self, session: Session, turn_id: str) -> None:
        """Continue a turn whose last pending tool result just arrived (in the background)."""
        runner = TurnRunner(self.config_for(session), self.store, on_event=self._publisher(session.id))
        live = _Live(runner, session.id)
        self._live[turn_id] = live
        self._spawn(live, runner.resume(turn_id), turn_id=turn_id)

    # turns of dead processes ----------------------------------------------------------------
    def start_sweeping(self) -> None:
        """Look for turns of dead processes every ``sweep_interval`` seconds, until ``aclose``."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="turnstream-sweeper")

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception as exc:  # the store is down: the next sweep tries again
                log.warning("looking for turns of dead processes failed: %s", exc)
            await asyncio.sleep(self.sweep_interval)

    async def sweep(self) -> list[str]:
        """Adopt the running turns of dead runners and take each over (or end it, in
        ``interrupt`` mode); the ids adopted."""
        if self.draining:
            return []
        async with self._sweep_lock:
            dead = await self.store.dead_runners(stale_after=self.stale_after)
            if not dead:
                return []
            ids = await self.store.adopt_turns(dead)
            for tid in ids:
                await self._orphan(tid)
            return ids

    async def _orphan(self, turn_id: str) -> None:
        turn = await self.store.get_turn(turn_id)
        session = await self.store.get_session(turn.session_id) if turn is not None else None
        if turn is None or session is None:
            return
        if self.takeover == "interrupt":
            log.info("turn %s: its process is gone; interrupted", turn_id)
            await close_out_stored(self.store, turn_id, "interrupted", INTERRUPTED_RESULT,
                                   on_event=self._publisher(session.id))
            return
        log.info("turn %s: its process is gone; taken over here", turn_id)
        runner = TurnRunner(self.config_for(session), self.store, on_event=self._publisher(session.id))
        live = _Live(runner, session.id)
        self._live[turn_id] = live
        self._spawn(live, runner.take_over(turn_id), turn_id=turn_id)

    # shutting down --------------------------------------------------------------------------
    async def drain(self, grace: float) -> None:
        """Stop taking turns, give the running ones ``grace`` seconds to finish, and abandon
        the rest to another process (see the module doc)."""
        self.draining = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        lives = list(self._running)
        if lives:
            log.info("shutting down: %d turn(s) running; waiting up to %g s for them", len(lives), grace)
            await asyncio.wait([asyncio.ensure_future(live.done.wait()) for live in lives], timeout=grace)
        left = [live for live in self._running if not live.done.is_set()]
        for live in left:
            live.cancelled = live.abandoned = True
            live.runner.abandon()
        for live in left:
            await live.done.wait()
        if left:
            log.info("shutting down: %d turn(s) left running for another process to take over", len(left))

    def _publisher(self, session_id: str) -> Callable[[StreamEvent], None]:
        bus = self.bus

        def publish(ev: StreamEvent) -> None:
            bus.publish(session_id, ev)

        return publish

    def _spawn(self, live: _Live, coro: Awaitable[Any], turn_id: str | None = None) -> asyncio.Task[None]:
        task = asyncio.create_task(self._drive(live, coro, turn_id))
        live.task = task
        self._running.add(live)
        task.add_done_callback(lambda _: self._running.discard(live))
        return task

    async def _drive(self, live: _Live, coro: Awaitable[Any], turn_id: str | None) -> None:
        runner = live.runner
        error: BaseException | None = None
        try:
            await coro
        except asyncio.CancelledError:
            if not live.cancelled:
                raise
        except TurnNotWaiting as exc:  # another request or process continued it first
            if turn_id is None:
                raise
            log.info("turn %s: not resumed here (%s)", turn_id, exc)
        except TurnTakenOver:
            pass  # another process runs it now (the runner logged it)
        except Exception as exc:
            if runner.turn_id:
                error = exc
            elif turn_id is None:
                raise  # a turn that never started (TurnConflictError): start() reports it
            else:
                log.error("turn %s could not be resumed", turn_id, exc_info=exc)
        finally:
            tid = runner.turn_id
            if tid and runner.turn is None and not live.abandoned and not runner.taken_over:
                await shielded(self._safety_net(live, error))
            if tid and self._live.get(tid) is live:
                del self._live[tid]
            live.done.set()
            ended = runner.turn
            if ended is not None and ended.status != "awaiting_client" and not live.abandoned:
                self._turn_ended(live.session_id)

    def _turn_ended(self, session_id: str) -> None:
        """A turn of the session ended, however (complete, failed, cancelled while it ran or
        while it waited for the client): what was queued for it and not read starts the next."""
        if not self.draining:
            self._next = asyncio.create_task(self._start_queued(session_id))

    async def _start_queued(self, session_id: str) -> None:
        """The turn of the session ended: the messages queued while it ran and not given to it
        (``queued_messages=next_turn``, or sent during its last step, or before it paused and
        was cancelled) start the next turn. If another turn of the session opened first (a new
        message), they are queued for it instead."""
        try:
            queued = await self.store.take_queued(session_id)
            session = await self.store.get_session(session_id) if queued else None
            if session is None:
                return
            text = "\n\n".join(m.text for m in queued if m.text)
            refs = [a for m in queued for a in m.attachments]
            try:
                _, sub = await self.start(session, text, attachments=refs)
            except TurnConflictError:
                lost = [m for m in queued if await self.store.queue_message(session_id, m.text, m.attachments) is None]
                if lost:
                    log.warning("session %s: %d queued message(s) dropped: another turn opened first and "
                                "waits for the client", session_id, len(lost))
                return
            sub.close()
        except Exception:
            log.exception("session %s: the queued messages could not start the next turn", session_id)

    async def _safety_net(self, live: _Live, error: BaseException | None) -> None:
        tid = live.runner.turn_id
        try:
            turn = await self.store.get_turn(tid)
            if turn is None or turn.status != "running":
                return
            publish = self._publisher(live.session_id)
            if error is not None:
                log.error("turn %s failed", tid, exc_info=error)
                reason = f"{type(error).__name__}: {error}"
                await close_out_stored(self.store, tid, "failed", FAILED.format(reason=reason), on_event=publish,
                                       error=ErrorEvent(code="internal_error", message=reason, retryable=False))
            else:
                await close_out_stored(self.store, tid, "cancelled", CANCELLED, on_event=publish)
        except Exception:
            log.exception("turn %s could not be closed out", tid)

    # cancelling --------------------------------------------------------------------------
    async def cancel(self, session_id: str, turn_id: str) -> str | None:
        """Cancel a turn wherever it runs. Returns ``cancelled`` (done here), ``cancelling``
        (asked the process that runs it, or the turn ends once the store takes writes again),
        or None when the turn is not open."""
        if (local := await self._cancel_local(turn_id)) is not None:
            return local
        turn = await self.store.get_turn(turn_id)
        if turn is None:
            return None
        if turn.status == "running" and turn_id in await self.sweep():  # its process was gone
            if (local := await self._cancel_local(turn_id)) is not None:
                return local
            turn = await self.store.get_turn(turn_id)
            if turn is None:
                return None
        if turn.status == "awaiting_client":
            if await self.store.claim_turn(turn_id, "awaiting_client", "running"):
                await close_out_stored(self.store, turn_id, "cancelled", CANCELLED,
                                       on_event=self._publisher(session_id))
                self._turn_ended(session_id)
                return "cancelled"
            if (local := await self._cancel_local(turn_id)) is not None:  # resumed here meanwhile
                return local
            turn = await self.store.get_turn(turn_id)
            if turn is None:
                return None
        if turn.status == "running":
            await self.bus.control("cancel", turn_id)
            return "cancelling"
        return None

    async def _cancel_local(self, turn_id: str) -> str | None:
        """Cancel a turn driven here: ``cancelled`` once it has ended, ``cancelling`` if it has
        not after ``CANCEL_WAIT`` seconds (its end waits for the store); None if not here."""
        live = self._live.get(turn_id)
        if live is None:
            return None
        live.cancelled = True
        live.runner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(live.done.wait()), CANCEL_WAIT)
        except TimeoutError:
            return "cancelling"
        return "cancelled"

    async def _on_control(self, action: str, turn_id: str) -> None:
        if action == "cancel" and turn_id in self._live:
            log.info("turn %s: cancel requested by another process", turn_id)
            await self._cancel_local(turn_id)

    async def aclose(self) -> None:
        """Cancel every turn this process drives and wait until each is closed out."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await self.admission.aclose()
        lives = list(self._running)
        for live in lives:
            live.cancelled = True
            live.runner.cancel()
        for live in lives:
            if live.task is not None:
                with contextlib.suppress(BaseException):
                    await live.task

