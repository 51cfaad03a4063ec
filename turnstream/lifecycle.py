"""How a turn's events are written, how a turn ends, and how a waiting turn takes an answer.

Three things every path of a turn shares, in one place:

* ``TurnRecorder`` is the one writer of a turn's events. It numbers them, stores each one
  that is kept (a block with its ``block_stop`` in one transaction, a status change riding
  along), and only then hands it to ``on_event`` (the bus, a queue). The runner drives one
  for the turn it runs; the other paths load one from the store (``TurnRecorder.load``).
* ``close_out`` ends a turn that will not finish normally: every tool call without a result
  gets an ``is_error`` result (so the transcript stays valid for every provider), an
  ``error`` event is written when there is one, then ``turn_complete``. The runner calls it
  on cancel and failure; the server's turn manager calls ``close_out_stored`` for a turn no
  runner will finish (cancelled while it waited for the client, its driving task lost, its
  process gone).
* ``submit_tool_result`` records a client's answer to a ``tool_request``: a client tool's
  result, or an approval decision (a denial with the user's reason, when given), kept in
  the audit trail with who took it and when, and an "always allow" that grants the tool
  for the rest of the session; ``pending_requests`` says which requests still wait for one;
  ``carry_attachments`` adds the images and files of a message that answered them.

The caller of ``close_out_stored`` must own the turn: it is ``running`` (or was just taken
from ``awaiting_client`` with ``claim_turn``) and nobody else drives it.

Why one module of this size: these are the only writes of a turn's events outside its runner,
and they share the rule that keeps a transcript valid (every call answered once, in order);
split, each would need its own copy of that rule.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from .blocks import (
    Attachment,
    Block,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    TurnStatus,
    TurnStopReason,
    Usage,
    UserBlock,
)
from .elicitation import check_answer
from .errors import InvalidValue, NotFound, SeqConflictError, StoreWriteError, TurnNotWaiting, TurnTakenOver
from .events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    StepStart,
    StepUsage,
    StreamEvent,
    ToolApproval,
    ToolProgress,
    ToolRequest,
    TurnComplete,
)
from .store.protocol import DecisionSource, Store, StoredEvent, ToolDecision
from .tools.executor import DENIED
from .transcript import INTERRUPTED_RESULT

log = logging.getLogger("turnstream.lifecycle")

EventSink = Callable[[StreamEvent], None]

NOT_REPEATED = ("Not run again: this call may already have run before the server stopped, and the user "
                "chose not to repeat it. Check its effect before you rely on it.")

BUDGET_DECLINED = ("Not run: the turn reached its budget and the user chose not to spend more. "
                   "Answer now with what you have.")

SUBMIT_ATTEMPTS = 5
"""Tries to store an answer when other writers keep taking the turn's next number."""


class TurnRecorder:
    """Numbers, stores and hands on the events of one turn; keeps its blocks and usage."""

    def __init__(self, store: Store, turn_id: str, session_id: str, *, user_input: str = "", model: str = "",
                 n: int = 0, blocks: Sequence[Block] = (), usage: Usage | None = None,
                 step_usage: Sequence[Usage] = (), on_event: EventSink | None = None) -> None:
        self.store = store
        self.turn_id = turn_id
        self.session_id = session_id
        self.user_input = user_input
        self.model = model
        self.n = n
        """The number of the last event written (stored or live)."""
        self.blocks: list[Block] = list(blocks)
        self.usage = usage or Usage()
        self.step_usage: list[Usage] = list(step_usage)
        self.error: str | None = None
        self.on_event = on_event
        self.turn: Turn | None = None
        """The finished turn, once ``finish`` ran."""
        self.agent: str | None = None
        """The agent now speaking, in a session of several agents: stamped on each step start,
        block start and new block (docs/agents.md)."""
        self._pending: list[StoredEvent] = []
        """Stored events held back for the turn's next write (see ``emit``)."""

    @classmethod
    async def load(cls, store: Store, turn_id: str, *, on_event: EventSink | None = None) -> TurnRecorder | None:
        """A recorder that goes on from what the store holds for the turn; None if it is gone."""
        turn = await store.get_turn(turn_id)
        if turn is None:
            return None
        return cls(store, turn.id, turn.session_id, user_input=turn.input, model=turn.model,
                   n=await store.last_event_n(turn_id), blocks=turn.blocks, usage=turn.usage,
                   step_usage=turn.step_usage, on_event=on_event)

    @property
    def steps(self) -> int:
        return max((b.step for b in self.blocks), default=0)

    async def emit(self, ev: StreamEvent, status: TurnStatus | None = None, *, steps: int | None = None) -> None:
        """Number ``ev``, store it unless it is live only (deltas, block starts, a tool's progress),
        then hand it on.

        A ``block_stop`` stores its block; ``turn_complete`` records the turn's end (usage,
        ``steps``, the error); ``status`` rides in the same transaction. A ``step_start``
        that nobody sees live is held back and stored with the turn's next write (a crash
        in between loses only that event)."""
        self.n += 1
        ev.turn_id, ev.n = self.turn_id, self.n
        if self.agent is not None:
            if type(ev) is StepStart or type(ev) is BlockStart:
                ev.agent = self.agent
            elif type(ev) is BlockStop and ev.block is not None and ev.block.agent is None:
                ev.block.agent = self.agent
        if type(ev) is not BlockDelta and type(ev) is not BlockStart and type(ev) is not ToolProgress:
            stored = StoredEvent.of(ev)
            if (type(ev) is StepStart or type(ev) is StepUsage) and self.on_event is None:
                self._pending.append(stored)
                return
            pending, self._pending = self._pending, []
            try:
                if type(ev) is BlockStop:
                    assert ev.block is not None
                    await self.store.append_block(self.turn_id, ev.block, stored, status, pending=pending)
                elif type(ev) is TurnComplete:
                    await self.store.finish_turn(
                        self.turn_id, status=ev.status, stop_reason=ev.stop_reason, usage=self.usage,
                        steps=self.steps if steps is None else steps, event=stored, error=self.error,
                        step_usage=self.step_usage, pending=pending)
                else:
                    await self.store.append_event(stored, status, pending=pending)
            except TurnTakenOver:
                raise  # not a failure of the store: another process owns the turn now
            except Exception as exc:
                raise StoreWriteError(f"could not store {ev.name} {self.n} of turn {self.turn_id}: "
                                      f"{type(exc).__name__}: {exc}") from exc
        if self.on_event is not None:
            self.on_event(ev)

    async def add_block(self, block: Block) -> None:
        """A finished block that was not streamed (a tool result): its start and its stop."""
        tid = block.tool_use_id if isinstance(block, ToolResultBlock) else None
        await self.emit(BlockStart(index=block.seq, type=block.type, tool_use_id=tid,
                                   tool_name=self.tool_name(tid) if tid else None))
        self.blocks.append(block)
        await self.emit(BlockStop(index=block.seq, block=block))

    async def add_result(self, call: ToolUseBlock, content: str, is_error: bool,
                         attachments: Sequence[Attachment] = ()) -> None:
        await self.add_block(ToolResultBlock(seq=len(self.blocks), step=call.step, tool_use_id=call.tool_use_id,
                                             content=content, is_error=is_error, attachments=list(attachments)))

    def tool_name(self, tool_use_id: str) -> str | None:
        for b in self.blocks:
            if isinstance(b, ToolUseBlock) and b.tool_use_id == tool_use_id:
                return b.name
        return None

    def unanswered(self) -> list[ToolUseBlock]:
        """The tool calls that have no result yet, in call order."""
        answered = {b.tool_use_id for b in self.blocks if isinstance(b, ToolResultBlock)}
        return [b for b in self.blocks if isinstance(b, ToolUseBlock) and b.tool_use_id not in answered]

    async def close_out(self, reason: str, status: TurnStatus, error: ErrorEvent | None = None, *,
                        steps: int | None = None, notes: Mapping[str, str] | None = None) -> Turn:
        """End the turn abnormally with a valid transcript: ``reason`` (or the call's own entry
        in ``notes``, by tool_use_id) answers every unanswered call (``is_error``), ``error`` is
        written if given, then ``turn_complete`` with ``status`` and stop reason ``cancelled``
        (for a cancel) or ``error``."""
        for call in self.unanswered():
            await self.add_result(call, (notes or {}).get(call.tool_use_id, reason), True)
        if error is not None:
            self.error = error.message
            await self.emit(error)
        return await self.finish(status, "cancelled" if status == "cancelled" else "error", steps=steps)

    async def finish(self, status: TurnStatus, stop_reason: TurnStopReason, *, steps: int | None = None) -> Turn:
        """Write ``turn_complete`` and return the turn as it now stands."""
        steps = self.steps if steps is None else steps
        await self.emit(TurnComplete(status=status, stop_reason=stop_reason, usage=self.usage, steps=steps),
                        steps=steps)
        self.turn = Turn(id=self.turn_id, session_id=self.session_id, input=self.user_input, status=status,
                         blocks=list(self.blocks), usage=self.usage, step_usage=self.step_usage,
                         stop_reason=stop_reason, steps=steps, model=self.model, error=self.error)
        return self.turn


async def close_out_stored(store: Store, turn_id: str, status: TurnStatus, reason: str, *,
                           error: ErrorEvent | None = None, on_event: EventSink | None = None) -> Turn | None:
    """``close_out`` for a turn that no runner will finish, from what the store holds.
    None when the turn no longer exists. The caller owns the turn (see the module doc)."""
    recorder = await TurnRecorder.load(store, turn_id, on_event=on_event)
    if recorder is None:
        return None
    return await recorder.close_out(reason, status, error)


async def interrupt_orphans(store: Store, *, stale_after: float | None = None,
                            on_event: EventSink | None = None) -> list[str]:
    """End, as ``interrupted``, every running turn whose process is gone (``Store.dead_runners``):
    the library's way to clean up after a crash (the server takes such turns over instead,
    ``TurnRunner.take_over``). Returns the ids ended."""
    ids = await store.adopt_turns(await store.dead_runners(stale_after=stale_after))
    for tid in ids:
        await close_out_stored(store, tid, "interrupted", INTERRUPTED_RESULT, on_event=on_event)
    return ids


def completion(turn: Turn, n: int) -> TurnComplete:
    """The ``turn_complete`` that an ended turn's stored state implies, numbered ``n``: for
    a turn that ended without writing one (its process died before the close-out did)."""
    return TurnComplete(status=turn.status, stop_reason=turn.stop_reason or "error", usage=turn.usage,
                        steps=max((b.step for b in turn.blocks), default=0), turn_id=turn.id, n=n)


_ASKED_OR_ANSWERED = (ToolRequest.name, ToolApproval.name)
"""The stored events that ``_requests`` reads back (events.py names them)."""


async def _requests(store: Store, turn_id: str) -> tuple[dict[str, ToolRequest], dict[str, ToolApproval]]:
    """The turn's latest tool request of each call, and the approvals (or answers) given
    since it, by call id. A call asked again after its approval (a tool that asks the user
    for input once it runs) is open again."""
    requests: dict[str, ToolRequest] = {}
    approvals: dict[str, ToolApproval] = {}
    for stored in await store.events_after(turn_id, 0):
        if stored.name in _ASKED_OR_ANSWERED:
            ev = stored.event()
            if isinstance(ev, ToolRequest):
                requests[ev.tool_use_id] = ev
                approvals.pop(ev.tool_use_id, None)
            elif isinstance(ev, ToolApproval):
                approvals[ev.tool_use_id] = ev
    return requests, approvals


async def approvals_given(store: Store, turn_id: str) -> dict[str, ToolApproval]:
    """The approvals (and answers to ``elicitation`` requests) that settle a turn's open calls."""
    return (await _requests(store, turn_id))[1]


def _elicitation_answer(req: ToolRequest, content: str | None, approved: bool | None) -> dict[str, Any]:
    """The answer to a tool's question (``ToolRequest.elicitation``): ``content`` (a JSON
    object that fits the question's ``requested_schema``, ``elicitation.check_answer``)
    accepts, ``approved: false`` declines."""
    assert req.elicitation is not None
    state = req.elicitation.get("state")
    if approved is False:
        return {"action": "decline", "state": state}
    if content is None:
        raise InvalidValue("content", "content (a JSON object answering the request's requested_schema) or "
                                      "approved: false is required to answer an elicitation")
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise InvalidValue("content", "the answer to an elicitation must be a JSON object")
    schema = req.elicitation.get("requested_schema")
    if isinstance(schema, dict):
        check_answer(schema, value)
    return {"action": "accept", "content": value, "state": state}


async def pending_requests(store: Store, turn: Turn) -> dict[str, ToolRequest]:
    """The tool requests of a waiting turn that no answer has settled yet, by call id."""
    requests, approvals = await _requests(store, turn.id)
    answered = {b.tool_use_id for b in turn.blocks if isinstance(b, ToolResultBlock)}
    return {k: r for k, r in requests.items() if k not in answered and k not in approvals}


def denial(text: str, reason: str | None) -> str:
    """The result a model reads for a call the user turned down, with the user's reason."""
    reason = (reason or "").strip()
    return f"{text} The user's reason: {reason}" if reason else text


async def submit_tool_result(store: Store, turn_id: str, tool_use_id: str, *, content: str | None = None,
                             is_error: bool = False, approved: bool | None = None, reason: str | None = None,
                             on_event: EventSink | None = None, decided_by: str = "user", always: bool = False,
                             source: DecisionSource = "user") -> bool:
    """Record a client's answer to a ``tool_request``: a client tool's result (``content``,
    ``is_error``; ``approved=False`` declines to run it), or an approval decision for a
    server tool (``approved``). A result is stored as the call's ``tool_result`` block, an
    approval as a ``tool_approval`` event (the call runs when the turn continues), a denial
    as an ``is_error`` result that carries the user's ``reason`` when one is given. Each
    stored event goes to ``on_event`` after it is stored.

    A decision (an approval, a denial, a client tool declined) is kept in the audit trail
    with ``decided_by`` (who answered), the time and the reason. ``always`` (with
    ``approved=True``, for a server tool) allows the tool for the rest of the session: it is
    granted, and the turn's other calls of that tool that wait for approval are approved too.

    Returns True when every pending call of the turn is answered: continue it then.
    Raises ``NotFound`` (no such turn, or no such pending call), ``TurnNotWaiting``,
    ``InvalidValue`` naming ``content``, ``approved`` or ``always`` for an answer that does
    not fit the call, ``SeqConflictError`` when other writers keep getting in first."""
    for _ in range(SUBMIT_ATTEMPTS):
        turn = await store.get_turn(turn_id)
        if turn is None:
            raise NotFound("turn", f"unknown turn {turn_id}")
        if turn.status != "awaiting_client":
            raise TurnNotWaiting(turn_id, turn.status)
        requests, approvals = await _requests(store, turn_id)
        answered = {b.tool_use_id for b in turn.blocks if isinstance(b, ToolResultBlock)}
        req = requests.get(tool_use_id)
        if req is None or tool_use_id in answered or tool_use_id in approvals:
            raise NotFound("tool call", f"no pending tool call {tool_use_id} in turn {turn_id}")
        call = next(b for b in turn.blocks if isinstance(b, ToolUseBlock) and b.tool_use_id == tool_use_id)
        n = await store.last_event_n(turn_id) + 1
        ev_out: StreamEvent
        answer = None
        if req.elicitation is not None:
            if always:
                raise InvalidValue("always", "always is for server tools that need approval, not a tool's question")
            answer = _elicitation_answer(req, content, approved)
            content = None
        elif req.executor == "client":
            if always:
                raise InvalidValue("always", "always is for server tools that need approval, not client tools")
            if approved is False:
                content, is_error = denial(DENIED, reason), True
            elif content is None:
                raise InvalidValue("content", "content is required for a client tool's result")
        elif approved is None:
            raise InvalidValue("approved", "approved (true or false) is required for a tool that needs approval")
        elif approved:
            content = None
        elif always:
            raise InvalidValue("always", "always allows a tool: it goes with approved=true only")
        else:
            content, is_error = denial(BUDGET_DECLINED if req.budget else NOT_REPEATED if req.note else DENIED,
                                       reason), True
        if content is not None:
            block = ToolResultBlock(seq=len(turn.blocks), step=call.step, tool_use_id=tool_use_id,
                                    content=content, is_error=is_error)
            ev_out = BlockStop(index=block.seq, block=block, turn_id=turn_id, n=n)
        else:
            ev_out = ToolApproval(tool_use_id=tool_use_id, approved=True, answer=answer, turn_id=turn_id, n=n)
        try:
            if isinstance(ev_out, BlockStop):
                assert ev_out.block is not None
                await store.append_block(turn_id, ev_out.block, StoredEvent.of(ev_out))
                answered.add(tool_use_id)
            else:
                await store.append_event(StoredEvent.of(ev_out))
                approvals[tool_use_id] = ev_out
        except SeqConflictError:
            continue
        if on_event is not None:
            on_event(ev_out)
        if approved is not None:
            await store.record_tool_decisions(turn_id, [ToolDecision(
                tool_use_id, req.tool_name, approved, source, decided_by, time.time(),
                (reason or "").strip() or None, always)])
        if always:
            await store.grant_tool(turn.session_id, req.tool_name, decided_by)
            return await _approve_others(store, turn_id, req, decided_by, on_event)
        return all(t in answered or t in approvals for t in requests)
    raise SeqConflictError(f"could not record the result for {tool_use_id}: too many concurrent writers")


async def carry_attachments(store: Store, turn_id: str, attachments: Sequence[Attachment], *,
                            on_event: EventSink | None = None) -> None:
    """The images and files of a message that answered a waiting turn's questions (``steering``):
    a ``user`` block of the paused step, stored after the answers, so the turn's next step reads
    them. Raises ``SeqConflictError`` when other writers keep getting in first."""
    for _ in range(SUBMIT_ATTEMPTS):
        turn = await store.get_turn(turn_id)
        if turn is None:
            return
        block = UserBlock(seq=len(turn.blocks), step=max((b.step for b in turn.blocks), default=0),
                          attachments=list(attachments))
        ev = BlockStop(index=block.seq, block=block, turn_id=turn_id, n=await store.last_event_n(turn_id) + 1)
        try:
            await store.append_block(turn_id, block, StoredEvent.of(ev))
        except SeqConflictError:
            continue
        if on_event is not None:
            on_event(ev)
        return
    raise SeqConflictError(f"could not add the message's attachments to turn {turn_id}: other writers kept "
                           "getting in first")


async def _approve_others(store: Store, turn_id: str, granted: ToolRequest, granted_by: str,
                          on_event: EventSink | None) -> bool:
    """After an "always allow": approve the turn's other calls of that tool waiting for
    approval (not those that may already have run: their question is another one). True
    when nothing of the turn waits any more."""
    turn = await store.get_turn(turn_id)
    if turn is None:
        raise NotFound("turn", f"unknown turn {turn_id}")
    pending = await pending_requests(store, turn)
    for req in pending.values():
        if (req.tool_name == granted.tool_name and req.executor == "server" and req.note is None
                and req.elicitation is None):
            await submit_tool_result(store, turn_id, req.tool_use_id, approved=True, on_event=on_event,
                                     decided_by=granted_by, source="session_grant")
    turn = await store.get_turn(turn_id)
    return turn is not None and not await pending_requests(store, turn)


__all__ = ["EventSink", "TurnRecorder", "approvals_given", "close_out_stored", "completion", "denial",
           "interrupt_orphans", "pending_requests", "submit_tool_result"]
