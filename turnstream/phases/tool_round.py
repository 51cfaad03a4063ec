"""The tool round: what becomes of the tool calls a step ended with (SPEC §3).

``ToolRound`` answers each call. It refuses a call cut off by ``max_tokens`` or repeated past
the limit, runs the others through its ``ToolExecutor`` (after approval where a tool needs
it), and leaves the rest for the client: a client tool, an approval, a question a running
tool asks. While calls run, the tool-effect ledger records each one's start and end, so a
process that takes the turn over knows which may have run. Then the results are stored, with
the images a tool returned, and the ``tool_request`` events the turn waits on are emitted.
The round also runs the calls a turn continues with: those approved after a pause, and those
left unanswered when the turn was taken over.

Whether there is a round at all (the step limit, the budgets) and what follows it is the
conductor's decision (``loop.TurnRunner``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..blocks import Attachment, StopReason, ToolUseBlock
from ..budgets import Meter
from ..content import ContentRejected, check_parts, store_parts
from ..errors import Refused, StoreWriteError
from ..events import BudgetReached, ToolProgress, ToolRequest
from ..lifecycle import TurnRecorder
from ..limits import Limits
from ..store.protocol import Store, ToolCallRecord, ToolCallStart
from ..tools.executor import Approver, Outcome, ToolExecutor, idempotency_key
from ..tools.sampler import Sampler
from ..tools.tool import Tool

if TYPE_CHECKING:
    from ..telemetry.otel import Telemetry

log = logging.getLogger("turnstream.loop")  # the loop's log, as before the phases had modules of their own

REPEATED = ("Not run: this exact call ({name} with the same arguments) already ran {k} times in this turn; "
            "its results are above. Use them, or change the arguments.")
CUT_OFF = ("Not run: the arguments were cut off by the output limit (max_tokens={n}) before they were "
           "complete, twice. Send a smaller input, e.g. split the work into several calls.")
MAY_HAVE_RUN = ("This call may already have run: the server running the turn stopped while it ran. "
                "Approve to run it again, deny to go on without it.")


def canonical(call: ToolUseBlock) -> str:
    """A call's name and arguments as one string: equal for calls that would do the same."""
    return call.name + "\x00" + orjson.dumps(call.input, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(slots=True)
class RoundSettings:
    """What the tool round takes from the turn's configuration (``loop.RunConfig``)."""

    limits: Limits = field(default_factory=Limits)
    approver: Approver | None = None
    deps: dict[str, Any] = field(default_factory=dict)
    telemetry: Telemetry | None = None
    sampler: Sampler | None = None
    """The turn's model, for what a running call asks it (``sampling.TurnSampler``)."""


class ToolRound:
    """The tool calls of one turn, step after step. ``tools`` is read at each call (the
    conductor keeps it current: toolsets listed again, a team's speaker changed)."""

    def __init__(self, store: Store, rec: TurnRecorder, tools: Mapping[str, Tool], settings: RoundSettings) -> None:
        self.store = store
        self.rec = rec
        self.tools = tools
        self.limits = settings.limits
        self.executor = ToolExecutor(
            tools, max_result_chars=settings.limits.max_result_chars, approver=settings.approver,
            deps=settings.deps, on_start=self._record_start, on_end=self._record_end,
            telemetry=settings.telemetry, on_progress=self._progress, sampler=settings.sampler)

    async def run_calls(self, calls: list[ToolUseBlock], stop: StopReason, *, step: int, max_tokens: int) -> bool:
        """Run the calls of step ``step`` (which stopped for ``stop`` with ``max_tokens`` in
        force); True when some wait for the client."""
        rec, executor = self.rec, self.executor
        seen: dict[str, int] = {}
        for b in rec.blocks:
            if isinstance(b, ToolUseBlock) and b.step < step:
                k = canonical(b)
                seen[k] = seen.get(k, 0) + 1
        outcomes: list[Outcome] = []
        limit = self.limits.max_identical_calls
        if any(t.requires_approval for c in calls if (t := self.tools.get(c.name)) is not None):
            executor.grants = {g.tool: g for g in await self.store.tool_grants(rec.session_id)}
        for c in calls:
            if c.input_error and stop == "max_tokens":
                outcomes.append(Outcome(c, "result", CUT_OFF.format(n=max_tokens), True))
                continue
            k = canonical(c)
            seen[k] = seen.get(k, 0) + 1
            if seen[k] > limit and not c.input_error:
                outcomes.append(Outcome(c, "result", REPEATED.format(name=c.name, k=limit), True))
                continue
            outcomes.append(await executor.decide(c))
        return await self.settle(outcomes)

    async def resume_calls(self, calls: list[ToolUseBlock], started: dict[str, ToolCallRecord]) -> bool:
        """The unanswered calls of a step taken over (``started``: the ledger's records, by
        call id; see ``TurnRunner.take_over``); True when some wait for the client."""
        executor = self.executor
        outcomes: list[Outcome] = []
        asks: set[str] = set()
        for c in calls:
            tool = self.tools.get(c.name)
            record = started.get(c.tool_use_id)
            if record is None:
                outcomes.append(await executor.decide(c))  # it never started: decided as at the step's end
            elif record.result is not None:  # it ended before the process stopped: its result stands
                outcomes.append(Outcome(c, "result", record.result, bool(record.is_error)))  # no tool: not run
            elif tool is None:
                outcomes.append(Outcome(c, "result", f"Unknown tool '{c.name}'.", True))
            elif tool.idempotent:
                log.info("turn %s: %s (%s) runs again after a restart", self.rec.turn_id, c.name, c.tool_use_id)
                outcomes.append(Outcome(c, "result", tool=tool))
            else:
                asks.add(c.tool_use_id)
                outcomes.append(Outcome(c, "approval", tool=tool))
        return await self.settle(outcomes, asks)

    async def run_pending(self, approved: dict[str, dict[str, Any] | None]) -> bool:
        """After a pause: run the approved calls of the last step (all others are answered),
        each with the answer the user gave to what it asked, if it asked. True when some ask
        the user (again)."""
        pending = self.rec.unanswered()
        to_run = [Outcome(c, "result", tool=self.tools.get(c.name), answer=approved[c.tool_use_id])
                  for c in pending if c.tool_use_id in approved]
        waiting = [c for c in pending if c.tool_use_id not in approved]
        if waiting:
            raise Refused(f"turn {self.rec.turn_id} still waits for {', '.join(c.tool_use_id for c in waiting)}")
        for o in to_run:
            if o.tool is None:
                o.content, o.is_error = f"Unknown tool '{o.call.name}'.", True
        return await self.settle(to_run)

    async def settle(self, outcomes: list[Outcome], asks: Collection[str] = ()) -> bool:
        """Run the outcomes that run, store every result, and ask the client for the rest
        (``asks``: approvals of calls that may already have run). True when some wait."""
        rec = self.rec
        turn_id = rec.turn_id
        decided = [o.decision for o in outcomes if o.decision is not None]
        if decided:  # the audit trail: decisions taken here (a session grant, the approver)
            try:
                await self.store.record_tool_decisions(turn_id, decided)
                for d in decided:
                    if d.always:
                        await self.store.grant_tool(rec.session_id, d.tool, d.decided_by)
            except Exception as exc:
                raise StoreWriteError(f"could not record the approvals of turn {turn_id}: "
                                      f"{type(exc).__name__}: {exc}") from exc
        await self.executor.run(outcomes, session_id=rec.session_id, turn_id=turn_id)
        for o in outcomes:
            if o.kind == "result":
                await rec.add_result(o.call, o.content, o.is_error, await self._tool_images(o))
        pending = [o for o in outcomes if o.kind != "result"]
        for i, o in enumerate(pending):
            tool = o.tool
            assert tool is not None
            again = o.call.tool_use_id in asks
            await rec.emit(ToolRequest(tool_use_id=o.call.tool_use_id, tool_name=o.call.name, input=o.call.input,
                                       executor=tool.executor,
                                       requires_approval=(tool.requires_approval or again) and o.kind != "input",
                                       note=MAY_HAVE_RUN if again else None, elicitation=o.ask),
                           status="awaiting_client" if i == len(pending) - 1 else None)
        return bool(pending)

    async def stop_for_budget(self, calls: list[ToolUseBlock], reached: BudgetReached, meter: Meter) -> bool:
        """A ceiling was reached after a step with calls: ask the client whether to go on
        (True: the turn waits), or (``on_limit="answer"``) answer them as not run (False: the
        conductor makes the next step the last, with tools off)."""
        if self.limits.budgets.on_limit == "answer":
            for c in calls:
                await self.rec.add_result(c, meter.answer_now(reached), True)
            return False
        requests = []
        for c in calls:
            tool = self.tools.get(c.name)
            requests.append(ToolRequest(tool_use_id=c.tool_use_id, tool_name=c.name, input=c.input,
                                        executor=tool.executor if tool is not None else "server"))
        await meter.pause(self.rec, requests, reached)
        return True

    async def _tool_images(self, o: Outcome) -> list[Attachment]:
        """Store the images a tool returned; one that cannot be taken is named in the result
        text instead."""
        if not o.images:
            return []
        limits = self.limits
        try:
            check_parts(o.images, max_bytes=limits.max_attachment_bytes, max_count=limits.max_attachments,
                        field=("result",))
        except ContentRejected as exc:
            o.content += f"\n(the tool's images were not sent: {exc})"
            return []
        return await store_parts(self.store, o.images)

    async def _progress(self, ev: ToolProgress) -> None:
        """A running call's ``ToolContext.progress``: a live event of the turn."""
        await self.rec.emit(ev)

    async def _record_start(self, o: Outcome) -> None:
        """The tool-effect ledger: this call is about to run (the executor's ``on_start``)."""
        turn_id = self.rec.turn_id
        start = ToolCallStart(o.call.tool_use_id, o.call.name, idempotency_key(turn_id, o.call.tool_use_id))
        try:
            await self.store.start_tool_calls(turn_id, [start])
        except Exception as exc:
            raise StoreWriteError(f"could not record the start of tool call {o.call.tool_use_id} of turn "
                                  f"{turn_id}: {type(exc).__name__}: {exc}") from exc

    async def _record_end(self, o: Outcome) -> None:
        """The tool-effect ledger: this call ended while others of its step still run; its
        result is kept until the step's results are stored (the executor's ``on_end``)."""
        turn_id = self.rec.turn_id
        try:
            await self.store.end_tool_call(turn_id, o.call.tool_use_id, o.content, o.is_error)
        except Exception as exc:
            raise StoreWriteError(f"could not record the end of tool call {o.call.tool_use_id} of turn "
                                  f"{turn_id}: {type(exc).__name__}: {exc}") from exc


__all__ = ["CUT_OFF", "MAY_HAVE_RUN", "REPEATED", "RoundSettings", "ToolRound", "canonical"]
