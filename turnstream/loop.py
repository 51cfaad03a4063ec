"""TurnRunner: the loop (SPEC §3). The only place that decides to call the model again.

One runner drives one turn, from a new user message (``run``) or from the moment its last
pending tool result arrived (``resume``). All state lives in the store, so any process can
resume a turn that another one started. Events are numbered, persisted (all but deltas),
then handed to ``on_event``.

Cancellation: ``cancel()`` cancels the task driving the turn. The runner then closes what
is open (partial blocks kept, every unfinished tool call answered with an ``is_error``
result), marks the turn ``cancelled`` and emits ``turn_complete``. A cancellation that did
not come from ``cancel()`` gets the same clean-up, shielded, and is then re-raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson

from .assemble import Assembler, AssemblyError
from .blocks import Block, StopReason, ToolResultBlock, ToolUseBlock, Turn, TurnStatus, TurnStopReason, Usage
from .errors import ProviderError, StreamBrokenError
from .events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    StepRestart,
    StepStart,
    StreamEvent,
    ToolRequest,
    TurnComplete,
    TurnStart,
)
from .limits import Limits
from .providers.base import ModelRequest, Provider, ToolSpec
from .retry import stream_with_retries
from .store.protocol import SeqConflictError, Store, StoredEvent
from .tools.executor import DENIED, Approver, Outcome, ToolExecutor
from .tools.tool import Tool
from .transcript import build

log = logging.getLogger("turnstream.loop")

EventSink = Callable[[StreamEvent], None]

LIMIT_REACHED = ("Not run: the step limit of this turn (max_steps={n}) was reached. "
                 "Answer now with what you have.")
REPEATED = ("Not run: this exact call ({name} with the same arguments) already ran {k} times in this turn; "
            "its results are above. Use them, or change the arguments.")
CUT_OFF = ("Not run: the arguments were cut off by the output limit (max_tokens={n}) before they were "
           "complete, twice. Send a smaller input, e.g. split the work into several calls.")
STREAM_FAILED = "Not run: the response stream failed before this call was final ({reason})."
CANCELLED = "Not run: the turn was cancelled before this call finished."
STORE_FAILED = ("No result: the turn could not be stored ({reason}), so it ended here. "
                "The call may have run.")
STORE_RETRIES = 12
"""Attempts to record a turn ``failed`` after a store write failed (about 8 s in all)."""


class StoreWriteError(RuntimeError):
    """Storing one of a turn's events failed (e.g. the database restarted); ``__cause__``
    is the store's error."""


@dataclass(slots=True)
class RunConfig:
    """What a turn needs besides the store: the model, the tools and the limits."""

    provider: Provider
    tools: Sequence[Tool] = ()
    system: str | None = None
    limits: Limits = field(default_factory=Limits)
    approver: Approver | None = None
    deps: dict[str, Any] = field(default_factory=dict)
    live_deltas: bool = True
    """Emit ``block_delta`` events (with best-effort input parses). Off when nobody listens."""
    thinking_budget: int | None = None
    """Ask the model to think first, with this many tokens (Anthropic extended thinking)."""


def _canonical(call: ToolUseBlock) -> str:
    return call.name + "\x00" + orjson.dumps(call.input, option=orjson.OPT_SORT_KEYS).decode()


class TurnRunner:
    def __init__(self, config: RunConfig, store: Store, *, on_event: EventSink | None = None) -> None:
        self.config = config
        self.store = store
        self.on_event = on_event
        self.turn_id = ""
        self.session_id = ""
        self._n = 0
        self._blocks: list[Block] = []
        self._history: list[tuple[str, Sequence[Block]]] = []
        self._input = ""
        self._usage = Usage()
        self._step_usage: list[Usage] = []
        self._step = 0
        self._tools: dict[str, Tool] = {t.name: t for t in config.tools}
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._final_step = False
        self._max_tokens = config.limits.max_tokens
        self.turn: Turn | None = None
        self._current: Assembler | None = None
        self._error: str | None = None
        self._pending: list[StoredEvent] = []
        """Stored events held back for the turn's next write (see ``_emit``)."""

    # -- public ----------------------------------------------------------------------------

    async def run(self, session_id: str, user_input: str, *,
                  client_tools: list[dict[str, Any]] | None = None, history: Sequence[Turn] | None = None) -> Turn:
        """Start a turn and drive it until control returns to the user.

        ``history``: the session's earlier turns when the caller knows them (``[]`` for a
        session it has just created); None reads them from the store."""
        start = TurnStart(session_id=session_id, n=1)

        def first_event(turn_id: str) -> StoredEvent:  # turn_start is stored with the turn
            start.turn_id = turn_id
            return StoredEvent(turn_id, start.n, start.name, start.data())

        turn = await self.store.create_turn(session_id, user_input, model=self.config.provider.origin,
                                            client_tools=client_tools, first_event=first_event)
        self.turn_id, self.session_id, self._input, self._n = turn.id, session_id, user_input, start.n
        self._add_client_tools(client_tools or [])
        if history is None:
            history = [t for t in await self.store.list_turns(session_id) if t.id != turn.id]
        self._history = [(t.input, t.blocks) for t in history]
        if self.on_event is not None:
            self.on_event(start)
        return await self._drive()

    async def resume(self, turn_id: str) -> Turn:
        """Continue a turn whose pending tool results have all arrived (see ``submit``)."""
        if not await self.store.claim_turn(turn_id, "awaiting_client", "running"):
            turn = await self.store.get_turn(turn_id)
            raise ValueError(f"turn {turn_id} is not awaiting the client (status: "
                             f"{turn.status if turn else 'unknown'})")
        turn = await self.store.get_turn(turn_id)
        assert turn is not None
        self.turn_id, self.session_id, self._input = turn.id, turn.session_id, turn.input
        self._blocks = list(turn.blocks)
        self._usage, self._step_usage = turn.usage, list(turn.step_usage)
        self._step = max((b.step for b in turn.blocks), default=0)
        self._n = await self.store.last_event_n(turn_id)
        self._add_client_tools(await self.store.client_tools(turn_id))
        self._history = [(t.input, t.blocks) for t in await self.store.list_turns(turn.session_id)
                         if t.id != turn.id]
        approved = {e.data["tool_use_id"] for e in await self.store.events_after(turn_id, 0)
                    if e.name == "tool_approval" and e.data.get("approved")}
        return await self._drive(approved=approved)

    def cancel(self) -> None:
        """Stop the stream and the tools; the turn ends ``cancelled`` with a valid transcript."""
        self._cancel_requested = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # -- events ----------------------------------------------------------------------------

    async def _emit(self, ev: StreamEvent, status: TurnStatus | None = None) -> None:
        self._n += 1
        ev.turn_id, ev.n = self.turn_id, self._n
        if type(ev) is not BlockDelta and type(ev) is not BlockStart:
            stored = StoredEvent(self.turn_id, self._n, ev.name, ev.data())
            if type(ev) is StepStart and self.on_event is None:
                # Nobody sees this event before it is stored: it rides with the turn's next
                # write (a crash in between loses only this step_start).
                self._pending.append(stored)
                return
            pending, self._pending = self._pending, []
            try:
                if type(ev) is BlockStop:
                    assert ev.block is not None
                    await self.store.append_block(self.turn_id, ev.block, stored, status, pending=pending)
                elif type(ev) is TurnComplete:
                    await self.store.finish_turn(
                        self.turn_id, status=ev.status, stop_reason=ev.stop_reason,  # type: ignore[arg-type]
                        usage=self._usage, steps=self._step, event=stored, error=self._error,
                        step_usage=self._step_usage, pending=pending)
                else:
                    await self.store.append_event(stored, status, pending=pending)
            except Exception as exc:
                raise StoreWriteError(f"could not store {ev.name} {self._n} of turn {self.turn_id}: "
                                      f"{type(exc).__name__}: {exc}") from exc
        if self.on_event is not None:
            self.on_event(ev)

    async def _add_block(self, block: Block) -> None:
        """A finished block that was not streamed (a tool result): start + stop."""
        tid = block.tool_use_id if isinstance(block, ToolResultBlock) else None
        name = self._tool_name(tid) if tid else None
        await self._emit(BlockStart(index=block.seq, type=block.type, tool_use_id=tid, tool_name=name))
        self._blocks.append(block)
        await self._emit(BlockStop(index=block.seq, block=block))

    def _tool_name(self, tool_use_id: str) -> str | None:
        for b in self._blocks:
            if isinstance(b, ToolUseBlock) and b.tool_use_id == tool_use_id:
                return b.name
        return None

    def _add_client_tools(self, specs: list[dict[str, Any]]) -> None:
        for spec in specs:
            t = Tool.client(spec["name"], spec.get("description", ""), spec.get("input_schema"),
                            requires_approval=bool(spec.get("requires_approval", False)))
            self._tools[t.name] = t

    # -- the loop --------------------------------------------------------------------------

    async def _drive(self, approved: set[str] | None = None) -> Turn:
        self._task = asyncio.current_task()
        executor = ToolExecutor(self._tools, max_result_chars=self.config.limits.max_result_chars,
                                approver=self.config.approver, deps=self.config.deps)
        try:
            if approved is not None:
                await self._run_pending(executor, approved)
            while True:
                self._step += 1
                asm = await self._stream_step()
                stop = asm.stop_reason
                assert stop is not None
                calls = [b for b in asm.finished if isinstance(b, ToolUseBlock)]
                self._current = None
                if not calls:
                    if stop == "pause_turn" and not self._final_step and self._step < self.config.limits.max_steps:
                        continue
                    return await self._finish("complete", "max_steps" if self._final_step else stop)
                if self._final_step or self._step >= self.config.limits.max_steps:
                    msg = LIMIT_REACHED.format(n=self.config.limits.max_steps)
                    for c in calls:
                        await self._add_result(c, msg, True)
                    if self._final_step:
                        return await self._finish("complete", "max_steps")
                    self._final_step = True
                    continue
                if await self._run_calls(executor, calls, stop):
                    return await self._finish("awaiting_client", "awaiting_client")
        except asyncio.CancelledError:
            ours = self._cancel_requested
            if ours:
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            with anyio.CancelScope(shield=True):
                turn = await self._close_out(CANCELLED, "cancelled", None)
            if not ours:
                raise
            return turn
        except (ProviderError, AssemblyError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("turn %s failed: %s", self.turn_id, reason)
            err = ErrorEvent(code=getattr(exc, "code", "stream_protocol"), message=str(exc),
                             retryable=bool(getattr(exc, "retryable", False)))
            return await self._close_out(STREAM_FAILED.format(reason=reason), "failed", err)
        except StoreWriteError as exc:
            log.warning("turn %s: %s", self.turn_id, exc)
            return await self._store_failed(exc)
        except Exception as exc:
            # A bug or a failing dependency (an approver, the store): the turn still ends
            # `failed` with its blocks and a valid transcript, if the store lets us write.
            log.exception("turn %s failed unexpectedly", self.turn_id)
            err = ErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}", retryable=False)
            return await self._close_out(STREAM_FAILED.format(reason="internal error"), "failed", err)

    async def _stream_step(self) -> Assembler:
        """One provider call, restarted from the same transcript when its stream breaks."""
        cfg, limits = self.config, self.config.limits
        restarts = 0
        cut_retry_done = False
        while True:
            await self._emit(StepStart(step=self._step, max_steps=limits.max_steps))
            messages, _ = build([*self._history, (self._input, self._blocks)], cfg.provider.origin)
            tools = [ToolSpec(t.name, t.description, t.input_schema) for t in self._tools.values()]
            request = ModelRequest(model=cfg.provider.model, messages=messages, system=cfg.system, tools=tools,
                                   tool_choice="none" if self._final_step else "auto",
                                   max_tokens=self._max_tokens, thinking_budget=cfg.thinking_budget)
            taken = {b.tool_use_id for _, blocks in [*self._history, (self._input, self._blocks)]
                     for b in blocks if isinstance(b, ToolUseBlock)}
            asm = Assembler(step=self._step, first_seq=len(self._blocks), origin=cfg.provider.origin,
                            provider=cfg.provider.name, snapshots=cfg.live_deltas, taken_ids=taken)
            self._current = asm
            started = False
            try:
                async with aclosing(stream_with_retries(cfg.provider, request, limits.retry)) as events:
                    async for pev in events:
                        started = True
                        out = asm.feed(pev)
                        if out is None:
                            continue
                        if type(out) is BlockDelta:
                            if cfg.live_deltas:
                                await self._emit(out)
                        elif type(out) is BlockStop:
                            assert out.block is not None
                            self._blocks.append(out.block)
                            await self._emit(out)
                        else:
                            await self._emit(out)
                if not asm.ended:
                    raise StreamBrokenError("the stream ended without its final event", retryable=True)
                for stop in asm.close_all_open():  # e.g. a tool call cut off by max_tokens
                    assert stop.block is not None
                    self._blocks.append(stop.block)
                    await self._emit(stop)
            except ProviderError as exc:
                if not (started and exc.retryable and restarts < limits.stream_restarts):
                    raise
                restarts += 1
                await self._restart(asm, f"{type(exc).__name__}: {exc}")
                continue
            self._usage = self._usage + asm.usage
            self._step_usage.append(asm.usage)
            cut = [b for b in asm.finished if isinstance(b, ToolUseBlock) and b.input_error]
            if asm.stop_reason == "max_tokens" and cut and not cut_retry_done:
                cut_retry_done = True
                self._max_tokens = min(self._max_tokens * 2, limits.max_tokens_ceiling)
                await self._restart(asm, f"max_tokens: a tool call was cut off; retrying with "
                                         f"max_tokens={self._max_tokens}")
                continue
            if asm.stop_reason == "max_tokens" and cut:
                for b in cut:
                    b.input_error = f"cut off by max_tokens={self._max_tokens}"
            return asm

    async def _restart(self, asm: Assembler, reason: str) -> None:
        log.info("turn %s step %d restarts: %s", self.turn_id, self._step, reason)
        self._blocks = [b for b in self._blocks if b.step != self._step]
        await self.store.discard_step(self.turn_id, self._step)
        await self._emit(StepRestart(step=self._step, reason=reason))

    async def _add_result(self, call: ToolUseBlock, content: str, is_error: bool) -> None:
        block = ToolResultBlock(seq=len(self._blocks), step=call.step, tool_use_id=call.tool_use_id,
                                content=content, is_error=is_error)
        await self._add_block(block)

    async def _run_calls(self, executor: ToolExecutor, calls: list[ToolUseBlock], stop: StopReason) -> bool:
        """Run a step's calls; True when some wait for the client."""
        seen: dict[str, int] = {}
        for b in self._blocks:
            if isinstance(b, ToolUseBlock) and b.step < self._step:
                k = _canonical(b)
                seen[k] = seen.get(k, 0) + 1
        outcomes: list[Outcome] = []
        limit = self.config.limits.max_identical_calls
        for c in calls:
            if c.input_error and stop == "max_tokens":
                outcomes.append(Outcome(c, "result", CUT_OFF.format(n=self._max_tokens), True))
                continue
            k = _canonical(c)
            seen[k] = seen.get(k, 0) + 1
            if seen[k] > limit and not c.input_error:
                outcomes.append(Outcome(c, "result", REPEATED.format(name=c.name, k=limit), True))
                continue
            outcomes.append(await executor.decide(c))
        await executor.run(outcomes, session_id=self.session_id, turn_id=self.turn_id)
        for o in outcomes:
            if o.kind == "result":
                await self._add_result(o.call, o.content, o.is_error)
        pending = [o for o in outcomes if o.kind != "result"]
        for i, o in enumerate(pending):
            tool = o.tool
            assert tool is not None
            await self._emit(ToolRequest(tool_use_id=o.call.tool_use_id, tool_name=o.call.name, input=o.call.input,
                                         executor=tool.executor, requires_approval=tool.requires_approval),
                             status="awaiting_client" if i == len(pending) - 1 else None)
        return bool(pending)

    async def _run_pending(self, executor: ToolExecutor, approved: set[str]) -> None:
        """After a pause: run the approved calls of the last step (all others are answered)."""
        answered = {b.tool_use_id for b in self._blocks if isinstance(b, ToolResultBlock)}
        pending = [b for b in self._blocks if isinstance(b, ToolUseBlock) and b.tool_use_id not in answered]
        to_run = [Outcome(c, "result", tool=self._tools.get(c.name)) for c in pending if c.tool_use_id in approved]
        waiting = [c for c in pending if c.tool_use_id not in approved]
        if waiting:
            raise ValueError(f"turn {self.turn_id} still waits for {', '.join(c.tool_use_id for c in waiting)}")
        for o in to_run:
            if o.tool is None:
                o.content, o.is_error = f"Unknown tool '{o.call.name}'.", True
        await executor.run(to_run, session_id=self.session_id, turn_id=self.turn_id)
        for o in to_run:
            await self._add_result(o.call, o.content, o.is_error)

    async def _store_failed(self, exc: StoreWriteError) -> Turn:
        """A write failed (the database went away: a restart, a lost connection). End the turn
        ``failed`` from what the store holds, once it answers again; what was streaming and
        not stored is dropped, calls without a stored result get an error result. Bounded:
        if the store keeps failing the error is raised, and the turn, still ``running`` in
        the store, is interrupted by the next start's ``recover()``."""
        cause = exc.__cause__ or exc
        reason = f"{type(cause).__name__}: {cause}".strip()
        err = ErrorEvent(code="store_error", message=f"the turn could not be stored: {reason}", retryable=True)
        self._current = None
        delay = 0.05
        for attempt in range(STORE_RETRIES):
            try:
                turn = await self.store.get_turn(self.turn_id)
                if turn is not None and turn.status != "running":  # its end was stored after all
                    self.turn = turn
                    return turn
                if turn is not None:
                    self._blocks = list(turn.blocks)  # a block whose write failed may be missing
                    self._n = max(self._n, await self.store.last_event_n(self.turn_id))
                    return await self._close_out(STORE_FAILED.format(reason=reason), "failed", err)
            except Exception as again:
                if attempt == STORE_RETRIES - 1:
                    raise exc  # noqa: B904 - the first failure is the one to report; this one is its context
                log.info("turn %s: the store still fails (%s: %s); retrying", self.turn_id,
                         type(again).__name__, again)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            raise exc  # the turn is gone (its session was deleted meanwhile)
        raise AssertionError("unreachable")

    async def _close_out(self, reason: str, status: TurnStatus, err: ErrorEvent | None) -> Turn:
        """End a turn that did not finish normally, keeping a valid transcript."""
        asm = self._current
        if asm is not None and not asm.ended:
            for stop in asm.close_all_open():
                assert stop.block is not None
                self._blocks.append(stop.block)
                await self._emit(stop)
        answered = {b.tool_use_id for b in self._blocks if isinstance(b, ToolResultBlock)}
        for b in list(self._blocks):
            if isinstance(b, ToolUseBlock) and b.tool_use_id not in answered:
                await self._add_result(b, reason, True)
        if err is not None:
            self._error = err.message
            await self._emit(err)
        return await self._finish(status, "cancelled" if status == "cancelled" else "error")

    async def _finish(self, status: TurnStatus, stop_reason: TurnStopReason) -> Turn:
        await self._emit(TurnComplete(status=status, stop_reason=stop_reason, usage=self._usage, steps=self._step))
        turn = Turn(id=self.turn_id, session_id=self.session_id, input=self._input, status=status,
                    blocks=list(self._blocks), usage=self._usage, step_usage=self._step_usage,
                    stop_reason=stop_reason, steps=self._step, model=self.config.provider.origin, error=self._error)
        self.turn = turn
        return turn


async def submit_tool_result(store: Store, turn_id: str, tool_use_id: str, *, content: str | None = None,
                             is_error: bool = False, approved: bool | None = None) -> bool:
    """Record a client's answer to a ``tool_request``: a client tool's result, or an approval
    decision. Returns True when every pending call of the turn is answered (resume it then).
    Raises LookupError for a call that is not pending, ValueError for an unusable answer."""
    for _ in range(5):
        turn = await store.get_turn(turn_id)
        if turn is None:
            raise LookupError(f"unknown turn {turn_id}")
        if turn.status != "awaiting_client":
            raise LookupError(f"turn {turn_id} is not waiting for tool results (status: {turn.status})")
        events = await store.events_after(turn_id, 0)
        requests = {e.data["tool_use_id"]: e.data for e in events if e.name == "tool_request"}
        approvals = {e.data["tool_use_id"] for e in events if e.name == "tool_approval"}
        answered = {b.tool_use_id for b in turn.blocks if isinstance(b, ToolResultBlock)}
        req = requests.get(tool_use_id)
        if req is None or tool_use_id in answered or tool_use_id in approvals:
            raise LookupError(f"no pending tool call {tool_use_id} in turn {turn_id}")
        call = next(b for b in turn.blocks if isinstance(b, ToolUseBlock) and b.tool_use_id == tool_use_id)
        n = await store.last_event_n(turn_id) + 1
        result: ToolResultBlock | None = None
        if req["executor"] == "client":
            if approved is False:
                result = ToolResultBlock(tool_use_id=tool_use_id, content=DENIED, is_error=True)
            elif content is None:
                raise ValueError("content is required for a client tool's result")
            else:
                result = ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)
        else:
            if approved is None:
                raise ValueError("approved (true or false) is required for a tool that needs approval")
            if not approved:
                result = ToolResultBlock(tool_use_id=tool_use_id, content=DENIED, is_error=True)
        try:
            if result is not None:
                block = result.model_copy(update={"seq": len(turn.blocks), "step": call.step})
                await store.append_block(turn_id, block, StoredEvent(turn_id, n, "block_stop", {
                    "index": block.seq, "block": block.model_dump(mode="json", exclude_none=True)}))
                answered.add(tool_use_id)
            else:
                await store.append_event(StoredEvent(turn_id, n, "tool_approval",
                                                     {"tool_use_id": tool_use_id, "approved": True}))
                approvals.add(tool_use_id)
        except SeqConflictError:
            continue
        return all(t in answered or t in approvals for t in requests)
    raise RuntimeError(f"could not record the result for {tool_use_id}: too many concurrent writers")
