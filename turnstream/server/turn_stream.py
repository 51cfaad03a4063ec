"""What the protocol streams (AI SDK, AG-UI) follow besides one stretch of a turn.

* ``whole_turn``: a turn from its first event to its end, across the pauses where it waited
  for the client. A client that reconnects (the AI SDK's ``GET …/{chat}/stream``) rebuilds
  its whole message from it. A ``turn_complete`` that paused the turn is dropped when the
  turn went on after it; the stream ends at the one that ends the turn, or at the pause the
  turn is in now.
* ``with_notebook``: a turn's batches with the session's notebook changes mixed in, as they
  happen (``Bus.subscribe_messages``, so from every process on a shared database).

Both yield what ``Follower.batches`` yields (a list of envelopes, or None when a ping is
due); ``with_notebook`` adds the notebook's own messages as dicts.

How a protocol stream sends a step (``requested_steps``): ``live`` (the default), each delta
as it arrives, and a restarted step is mended in the form the protocol has; or ``whole``
(header ``X-Turnstream-Steps: whole`` or query ``steps=whole``), each step's parts held until
the provider's stream for it has ended (``in_step_stream``), so a restart drops what was
held and nothing sent is ever taken back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

from ..blocks import Session
from ..bus import Envelope, SessionMessage, Subscription
from ..events import BlockDelta, BlockStart, BlockStop, StreamEvent, TurnComplete
from .api import Call
from .errors import invalid_field
from .follow import Follower
from .state import AppState

Batch = list[Envelope] | None
Item = list[Envelope] | dict[str, Any] | None

StepsMode = Literal["live", "whole"]
STEPS_MODES: tuple[StepsMode, ...] = ("live", "whole")
STEPS_HEADER = {"X-Turnstream-Steps": "`live` (default): deltas as they arrive; `whole`: each step's parts once "
                                      "its provider stream has ended, so a restarted step never shows."}
STEPS_QUERY = {"steps": "Same as X-Turnstream-Steps, for a client whose headers you do not set."}
STEPS_PARAMS = {name: {"type": "string", "pattern": "^([Ll][Ii][Vv][Ee]|[Ww][Hh][Oo][Ll][Ee])?$"}
                for name in (*STEPS_HEADER, *STEPS_QUERY)}
"""Their schemas: either mode, in any case; empty is the default."""

MODEL_BLOCKS = ("text", "thinking", "redacted_thinking", "tool_use", "provider")
"""Blocks a provider's stream makes (a tool result is not one: it comes after the stream)."""


def requested_steps(call: Call) -> StepsMode:
    """``live`` or ``whole``, from the header ``X-Turnstream-Steps`` or else the query ``steps``;
    422 naming the one that holds anything else."""
    for where, name, raw in (("header", "X-Turnstream-Steps", call.request.headers.get("x-turnstream-steps")),
                             ("query", "steps", call.request.query_params.get("steps"))):
        if not raw:
            continue
        for mode in STEPS_MODES:
            if raw.lower() == mode:
                return mode
        raise invalid_field([where, name], f"must be one of {', '.join(STEPS_MODES)}, not {raw!r}")
    return "live"


def in_step_stream(ev: StreamEvent) -> bool:
    """Whether ``ev`` belongs to the provider stream of the running step: a model block's
    start, delta or stop. Anything else (a tool result, a tool request, the next step, the
    end) says that stream has ended. An encoder asked for ``whole`` steps holds a step's
    output until then, and drops it on a ``step_restart``."""
    if isinstance(ev, BlockStart):
        return ev.type in MODEL_BLOCKS
    if isinstance(ev, BlockStop):
        return ev.block is None or ev.block.type in MODEL_BLOCKS
    return isinstance(ev, BlockDelta)


async def whole_turn(state: AppState, session_id: str, turn_id: str) -> AsyncGenerator[Batch, None]:
    """Every event of the turn, stored ones first, then live, until it ends or waits."""
    after = 0
    while True:
        follower = Follower(state.store, state.bus, session_id, turn_id, after,
                            ping_interval=state.settings.ping_interval)
        went_on = False
        async with aclosing(follower.batches()) as batches:
            async for batch in batches:
                last = batch[-1].event() if batch else None
                if batch and isinstance(last, TurnComplete) and last.status == "awaiting_client" \
                        and await state.store.last_event_n(turn_id) > last.n:
                    # A pause the turn has left behind: not the end of the message.
                    if len(batch) > 1:
                        yield batch[:-1]
                    after, went_on = last.n, True
                    break
                yield batch
        if not went_on:
            return


def notebook_feed(state: AppState, session: Session) -> Subscription | None:
    """A subscription to the session's notebook changes, when its toolset has a notebook."""
    if state.notebooks is None or session.toolset not in (None, "notebook"):
        return None
    return state.bus.subscribe_messages(session.id)


async def with_notebook(batches: AsyncIterator[Batch], feed: Subscription | None) -> AsyncGenerator[Item, None]:
    """``batches`` as they come, with each notebook change of ``feed`` between them. Ends with
    ``batches``; closes ``feed``."""
    if feed is None:
        async with aclosing(_plain(batches)) as plain:
            async for item in plain:
                yield item
        return
    it = aiter(batches)
    nxt: asyncio.Future[Batch] = asyncio.ensure_future(anext(it))
    msg: asyncio.Future[Any] = asyncio.ensure_future(feed.get())
    try:
        while True:
            done, _ = await asyncio.wait({nxt, msg}, return_when=asyncio.FIRST_COMPLETED)
            if msg in done:
                item = msg.result()
                if isinstance(item, SessionMessage) and item.data.get("type") == "notebook":
                    yield item.data
                msg = asyncio.ensure_future(feed.get())
            if nxt in done:
                try:
                    batch = nxt.result()
                except StopAsyncIteration:
                    return
                yield batch
                nxt = asyncio.ensure_future(anext(it))
    finally:
        feed.close()
        for task in (nxt, msg):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await task
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def _plain(batches: AsyncIterator[Batch]) -> AsyncGenerator[Item, None]:
    async for batch in batches:
        yield batch


__all__ = ["MODEL_BLOCKS", "STEPS_HEADER", "STEPS_QUERY", "Batch", "Item", "StepsMode", "in_step_stream",
           "notebook_feed", "requested_steps", "whole_turn", "with_notebook"]
