"""Running the tool calls of one step (SPEC §4).

The executor decides, for every call, what happens to it — run now, refuse with an
``is_error`` result, or wait for the client (a client tool, or an approval) — and runs the
calls it may run in one task group with a per-call deadline. Results come back in call
order. Every failure becomes text the model can act on; nothing raised by a tool escapes,
but cancellation always does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel

from ..blocks import ToolUseBlock
from ..content import FilePart, ImagePart, MediaPart
from ..errors import InputNeeded, ToolError
from ..events import ToolProgress
from ..store.protocol import ToolDecision, ToolGrant
from .sampler import Sampler
from .tool import Tool, ToolContext

if TYPE_CHECKING:
    from ..telemetry.otel import Telemetry

log = logging.getLogger("turnstream.tools")

Approver = Callable[[ToolUseBlock, Tool], Awaitable[bool | Literal["always"]]]
"""Asked inline before a ``requires_approval`` tool runs; False denies the call, ``"always"``
allows it and every later call of the tool in the session (a grant the runner stores)."""

EXPECTED_REFUSALS: tuple[type[Exception], ...] = (ToolError, FileNotFoundError, IsADirectoryError,
                                                 NotADirectoryError)
"""A tool saying no to its input (a path outside the root, a missing file): an answer for the
model, logged at INFO in one line. Any other exception is a bug in the tool and is logged with
its traceback."""

DENIED = "The user denied this tool call; it was not run. Do not retry it unless the user asks."


@dataclass(slots=True)
class Outcome:
    """What became of one call: a result now, or a wait for the client."""

    call: ToolUseBlock
    kind: Literal["result", "client", "approval", "input"]
    content: str = ""
    is_error: bool = False
    tool: Tool | None = None
    ask: dict[str, Any] | None = None
    """``input``: what the tool asks the user (``InputNeeded.request()``)."""
    answer: dict[str, Any] | None = None
    """The user's answer to what this call asked before, handed to the tool (``ToolContext.answer``)."""
    images: list[MediaPart] = field(default_factory=list)
    """Images the tool returned besides its text (``ImagePart`` values), stored by the loop."""
    decision: ToolDecision | None = None
    """Taken here without asking the client (a session grant, the approver): for the audit trail."""
    error_type: str | None = None
    """Why a call that ran failed: the exception's class name, ``timeout`` or ``invalid_arguments``."""


def idempotency_key(turn_id: str, tool_use_id: str) -> str:
    """The key a call's every attempt receives: its turn and call ids (unique, and stable)."""
    return f"{turn_id}:{tool_use_id}"


def format_seconds(s: float) -> str:
    return f"{int(s)}s" if float(s).is_integer() else f"{s:g}s"


class _Reports:
    """One call's ``ToolContext.progress``: each report handed to the sink in order, from the
    loop's thread or a sync tool's worker thread, and none after the call ended (a sync tool
    left running after its timeout)."""

    def __init__(self, tool_use_id: str, sink: Callable[[ToolProgress], Coroutine[Any, Any, None]]) -> None:
        self.tool_use_id = tool_use_id
        self.sink = sink
        self.loop = asyncio.get_running_loop()
        self.sent: list[asyncio.Future[None]] = []
        self.open = True

    def report(self, done: float, total: float | None, message: str | None) -> None:
        if not self.open:
            return
        ev = ToolProgress(tool_use_id=self.tool_use_id, progress=done, total=total, message=message)
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        if here:
            self.sent.append(self.loop.create_task(self.sink(ev)))
        else:
            self.loop.call_soon_threadsafe(self._send_soon, ev)

    def _send_soon(self, ev: ToolProgress) -> None:
        if self.open:
            self.sent.append(self.loop.create_task(self.sink(ev)))

    async def close(self) -> None:
        self.open = False
        await asyncio.gather(*self.sent, return_exceptions=True)


def split_images(value: Any) -> tuple[Any, list[MediaPart]]:
    """A return value without its images: an ``ImagePart``, or a list or tuple holding some
    (the rest of the list is the text), gives them apart."""
    if isinstance(value, ImagePart | FilePart):
        return "", [value]
    if isinstance(value, list | tuple) and any(isinstance(v, ImagePart | FilePart) for v in value):
        rest = [v for v in value if not isinstance(v, ImagePart | FilePart)]
        text = "\n".join(v if isinstance(v, str) else to_text(v) for v in rest)
        return text, [v for v in value if isinstance(v, ImagePart | FilePart)]
    return value, []


def to_text(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return orjson.dumps(value, default=str).decode()


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return (text[:limit] + f"\n\n[truncated: the result has {len(text)} characters; only the first {limit} "
            "are shown]")


class ToolExecutor:
    def __init__(self, tools: Mapping[str, Tool], *, max_result_chars: int = 100_000,
                 approver: Approver | None = None, deps: dict[str, Any] | None = None,
                 on_start: Callable[[Outcome], Awaitable[None]] | None = None,
                 on_end: Callable[[Outcome], Awaitable[None]] | None = None,
                 telemetry: Telemetry | None = None,
                 on_progress: Callable[[ToolProgress], Coroutine[Any, Any, None]] | None = None,
                 sampler: Sampler | None = None) -> None:
        self.tools = tools
        self.max_result_chars = max_result_chars
        self.approver = approver
        self.deps = deps or {}
        self.on_start = on_start
        """Called with each call just before it runs (the runner records its start in the
        tool-effect ledger)."""
        self.on_end = on_end
        """Called with each call that ended with a result while other calls of its batch still
        run (the runner keeps the result in the ledger until the step's results are stored)."""
        self.telemetry = telemetry
        """Each call that runs gets an ``execute_tool`` span (telemetry on only)."""
        self.grants: Mapping[str, ToolGrant] = {}
        """The tools the session always allows, by name: their calls run without asking."""
        self.cancel_notes: dict[str, str] = {}
        """tool_use_id -> the result a call cancelled while it ran asked for (``ToolContext.cancel_note``)."""
        self.on_progress = on_progress
        """Where a running call's ``ToolContext.progress`` goes, as a ``tool_progress`` event (the
        runner emits it); a call's progress is all handed on before its result."""
        self.sampler = sampler
        """The turn's model for what a running call asks it (``ToolContext.sampler``)."""

    def refusal(self, call: ToolUseBlock) -> str | None:
        """Why a call cannot run at all (before approval or execution), or None."""
        if call.input_error:
            return f"The tool call was not run: {call.input_error}. Send the call again with complete, valid JSON."
        if call.name not in self.tools:
            names = ", ".join(sorted(self.tools)) or "(none)"
            return f"Unknown tool '{call.name}'. Available tools: {names}."
        return None

    async def decide(self, call: ToolUseBlock) -> Outcome:
        reason = self.refusal(call)
        if reason is not None:
            return Outcome(call, "result", reason, True)
        tool = self.tools[call.name]
        if tool.executor == "client":
            return Outcome(call, "client", tool=tool)
        if tool.requires_approval:
            grant = self.grants.get(call.name)
            if grant is not None:
                return Outcome(call, "result", tool=tool, decision=ToolDecision(
                    call.tool_use_id, call.name, True, "session_grant", grant.granted_by, time.time()))
            if self.approver is None:
                return Outcome(call, "approval", tool=tool)
            answer = await self.approver(call, tool)
            ok, now = answer is True or answer == "always", time.time()
            decision = ToolDecision(call.tool_use_id, call.name, ok, "approver", "approver", now,
                                    always=answer == "always")
            if decision.always:  # the step's next calls of this tool run without asking
                self.grants = {**self.grants, call.name: ToolGrant(call.name, "approver", now)}
            if not ok:
                return Outcome(call, "result", DENIED, True, tool=tool, decision=decision)
            return Outcome(call, "result", tool=tool, decision=decision)
        return Outcome(call, "result", tool=tool)  # to run

    async def run(self, outcomes: list[Outcome], *, session_id: str, turn_id: str) -> None:
        """Run every outcome that has a tool and no content yet, filling in its result."""
        todo = [o for o in outcomes if o.kind == "result" and o.tool is not None and not o.content
                and not o.is_error]
        if not todo:
            return
        if len(todo) == 1:  # its result is stored right after: nothing to keep meanwhile
            await self._run_one(todo[0], session_id, turn_id, keep=False)
            return
        sequential = [o for o in todo if o.tool is not None and o.tool.sequential]
        parallel = [o for o in todo if o.tool is not None and not o.tool.sequential]

        async def run_in_order() -> None:
            for o in sequential:
                await self._run_one(o, session_id, turn_id, keep=True)

        try:
            async with asyncio.TaskGroup() as tg:
                for o in parallel:
                    tg.create_task(self._run_one(o, session_id, turn_id, keep=True))
                if sequential:
                    tg.create_task(run_in_order())
        except ExceptionGroup as group:
            # A tool's failure is its result; what escapes is a hook failing (the ledger's
            # store): the first, as it is, so the runner sees what it would see for one call.
            raise group.exceptions[0]  # noqa: B904 (from would replace its own cause, which the runner reads)

    async def _run_one(self, o: Outcome, session_id: str, turn_id: str, *, keep: bool) -> None:
        """Run one call between its ledger start and (``keep``: other calls of the batch may
        still run) its ledger end."""
        if self.on_start is not None:
            await self.on_start(o)
        if self.telemetry is None:
            await self._call(o, session_id, turn_id)
        else:
            assert o.tool is not None
            with self.telemetry.execute_tool(o.call, o.tool) as span:
                await self._call(o, session_id, turn_id)
                span.done(o.content, o.is_error, o.error_type)
        if keep and o.kind == "result" and self.on_end is not None:
            await self.on_end(o)

    async def _call(self, o: Outcome, session_id: str, turn_id: str) -> None:
        tool = o.tool
        assert tool is not None and tool.fn is not None
        try:
            args = tool.validate(o.call.input)
        except ValueError as exc:
            o.content, o.is_error, o.error_type = str(exc), True, "invalid_arguments"
            return
        ctx = None
        reports = _Reports(o.call.tool_use_id, self.on_progress) if self.on_progress is not None else None
        if tool.context_param:
            ctx = args[tool.context_param] = ToolContext(session_id, turn_id, o.call.tool_use_id, self.deps,
                                                         idempotency_key(turn_id, o.call.tool_use_id),
                                                         answer=o.answer, telemetry=self.telemetry,
                                                         on_progress=reports.report if reports else None,
                                                         sampler=self.sampler)
        try:
            await self._run(o, tool, args, ctx)
        finally:
            if reports is not None:  # the call's progress reaches the streams before its result
                await reports.close()

    async def _run(self, o: Outcome, tool: Tool, args: dict[str, Any], ctx: ToolContext | None) -> None:
        assert tool.fn is not None
        fn = tool.fn
        deadline = asyncio.timeout(tool.timeout)
        try:
            async with deadline:
                if tool.is_async:
                    value = await fn(**args)
                else:  # a sync tool runs in a worker thread; on time-out or cancel it is left to finish
                    value = await asyncio.to_thread(fn, **args)
                value, o.images = split_images(value)
                o.content = truncate(to_text(value), self.max_result_chars)
        except asyncio.CancelledError:
            if ctx is not None and ctx.cancel_note:
                self.cancel_notes[o.call.tool_use_id] = ctx.cancel_note
            raise
        except InputNeeded as exc:  # the turn pauses until the user answers
            o.kind, o.ask = "input", exc.request()
        except TimeoutError as exc:
            if not deadline.expired():  # the tool's own TimeoutError, not our deadline
                self._failed(o, tool, exc)
            else:
                o.content, o.is_error = f"Tool execution timed out after {format_seconds(tool.timeout)}", True
                o.error_type = "timeout"
                if ctx is not None and ctx.cancel_note:
                    o.content += f". {ctx.cancel_note}"
        except Exception as exc:
            self._failed(o, tool, exc)

    def _failed(self, o: Outcome, tool: Tool, exc: Exception) -> None:
        """The tool raised: the model reads ``TypeName: message``; the log gets one line for an
        expected refusal, the traceback for anything else."""
        if isinstance(exc, EXPECTED_REFUSALS):
            log.info("tool %s refused (call %s): %s: %s", tool.name, o.call.tool_use_id, type(exc).__name__, exc)
        else:
            log.error("tool %s failed (call %s)", tool.name, o.call.tool_use_id, exc_info=exc)
        o.content, o.is_error = truncate(f"{type(exc).__name__}: {exc}", self.max_result_chars), True
        o.error_type = type(exc).__name__
