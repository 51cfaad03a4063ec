"""TurnRunner: the loop (SPEC §3). The only place that decides to call the model again.

One runner drives one turn, from a new user message (``run``) or from the moment its last
pending tool result arrived (``resume``). All state lives in the store, so any process can
resume a turn that another one started. Events are numbered, persisted (all but deltas),
then handed to ``on_event``.

Every event goes through the turn's ``TurnRecorder`` (lifecycle.py), which stores it and
then hands it on; every abnormal end goes through its ``close_out``.

Cancellation: ``cancel()`` is the whole contract. It cancels the task driving the turn (or,
before that task started, makes the runner refuse to start). The runner then closes what
is open (partial blocks kept, every unfinished tool call answered with an ``is_error``
result), marks the turn ``cancelled`` and emits ``turn_complete``. A cancellation that did
not come from ``cancel()`` gets the same clean-up, shielded, and is then re-raised.

Why one module of this size: the loop is one decision (when to call the model again, and
what to refuse to run), and its parts share the turn's state (the step, the final step, the
max_tokens in force, the open assembler). Writing events, ending a turn and taking a
client's answer already live in ``lifecycle.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .agents import Conductor, Persona, Team
from .aio import shielded
from .assemble import Assembler
from .blocks import (
    Attachment,
    Block,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    TurnStatus,
    TurnStopReason,
    UserBlock,
)
from .budgets import BUDGET_SPENT, Meter
from .errors import (
    ProviderError,
    StoreWriteError,
    TurnCancelled,
    TurnNotWaiting,
    TurnTakenOver,
)
from .events import (
    ErrorEvent,
    StepRestart,
    StepStart,
    StepUsage,
    TurnStart,
)
from .lifecycle import EventSink, TurnRecorder, approvals_given
from .limits import Limits
from .output import (
    NO_ANSWER_CALL,
    OUTPUT_TOOL,
    OutputVia,
    Repair,
    answer_text,
    output_tool,
    problem,
)
from .phases.step import ModelStep, StepEnded, StepSettings
from .phases.tool_round import CUT_OFF, MAY_HAVE_RUN, REPEATED, RoundSettings, ToolRound
from .pricing import PRICES, Price
from .providers.base import Provider
from .sampling import TurnSampler
from .store.protocol import Store, StoredEvent
from .telemetry import telemetry_from_env
from .tools.executor import Approver
from .tools.tool import Tool
from .tools.toolset import Toolset, split_tools

if TYPE_CHECKING:
    from .telemetry.otel import Telemetry

log = logging.getLogger("turnstream.loop")

LIMIT_REACHED = ("Not run: the step limit of this turn (max_steps={n}) was reached. "
                 "Answer now with what you have.")
STREAM_FAILED = "Not run: the response stream failed before this call was final ({reason})."
CANCELLED = "Not run: the turn was cancelled before this call finished."
STORE_FAILED = ("No result: the turn could not be stored ({reason}), so it ended here. "
                "The call may have run.")
STORE_RETRY_MAX = 2.0
"""Longest wait, in seconds, between attempts to end a turn whose writes fail (disk full,
database gone): the turn is held, and ended as soon as the store takes writes again."""
RESTARTED = "the process running the turn stopped; this step is requested again"
TAKEOVER_GAP = 1_000_000
"""How far a runner that takes a turn over moves its event numbers past the last stored one.
The runner that died sent live events (deltas) numbered past its last stored event, and a
client may have seen them: the next numbers must stay above any it could have used, or a
client resuming from such an id would skip the new events (``n`` may have gaps)."""


@dataclass(slots=True)
class RunConfig:
    """What a turn needs besides the store: the model, the tools and the limits."""

    provider: Provider
    tools: Sequence[Tool | Toolset] = ()
    """Tools, and toolsets (MCP servers) whose tools are listed again before each step."""
    system: str | None = None
    limits: Limits = field(default_factory=Limits)
    approver: Approver | None = None
    deps: dict[str, Any] = field(default_factory=dict)
    live_deltas: bool = True
    """Emit ``block_delta`` events (with best-effort input parses). Off when nobody listens."""
    thinking_budget: int | None = None
    """Ask the model to think first, with this many tokens (Anthropic extended thinking)."""
    take_queued: bool = True
    """Give the model, before each step after the first, the messages queued for the session
    while the turn ran (``Store.queue_message``); off, they wait for the turn to end."""
    output: type[BaseModel] | None = None
    """Validate the final answer as this model (docs/structured-output.md)."""
    output_via: OutputVia = "native"
    """Ask for it through the API's own option, or through an answer tool (``output.OutputVia``)."""
    team: Team | None = None
    """Several agents (docs/agents.md): who speaks is decided at each step boundary, and the
    provider, system prompt, tools, thinking and output above are those of the speaker."""
    telemetry: Telemetry | None = field(default_factory=telemetry_from_env)
    """OpenTelemetry spans and metrics (``telemetry/``); None, the default unless the ``OTEL_*``
    variables ask for it, costs nothing."""
    prices: Mapping[str, Price] = field(default_factory=lambda: PRICES)
    """The price table that turns usage into cost (``turnstream.pricing``)."""
    prompt_cache_key: str | None = None
    """OpenAI's ``prompt_cache_key`` for every step (None: one per session, from its id)."""


Prelude = Callable[[], Awaitable[bool | StepEnded]]
"""What a turn's runner does before the loop: start the turn, resume it after a pause, or take
it over (see ``TurnRunner._drive``)."""


class TurnRunner:
    def __init__(self, config: RunConfig, store: Store, *, on_event: EventSink | None = None) -> None:
        self.config = config
        self.store = store
        self.on_event = on_event
        self._rec: TurnRecorder | None = None
        self._round: ToolRound | None = None
        """The tool round, made with the recorder (``_bind``)."""
        self._turn_id = ""
        self._history: list[tuple[str, Sequence[Block]]] = []
        self._step = 0
        plain, self._toolsets = split_tools(config.tools)
        self._tools: dict[str, Tool] = {t.name: t for t in plain}
        self._from_toolsets: dict[str, Tool] = {}
        self._client_tools: dict[str, Tool] = {}
        self._conductor = Conductor(config.team, store) if config.team is not None else None
        if config.team is not None:  # every member's tools, for calls answered before a step picks the speaker
            for name in config.team.members:
                self._tools.update({t.name: t for t in config.team.tools_of(name) if t.name not in self._tools})
        self._speaking = Persona("", config.provider, config.system, plain, config.thinking_budget,
                                 config.output, output_via=config.output_via)
        if config.output is not None and config.output_via == "tool":
            self._tools[OUTPUT_TOOL] = output_tool(config.output)
        self._repair = Repair()
        self._bad_answers = 0
        """Calls of the answer tool (``output_via="tool"``) whose answer was not valid."""
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._final_step = False
        self._model_step = ModelStep(store, StepSettings(
            limits=config.limits, live_deltas=config.live_deltas, telemetry=config.telemetry,
            prompt_cache_key=config.prompt_cache_key, team=config.team is not None))
        self._abandon = False
        self._meter = Meter(store, config.limits.budgets, config.provider.origin, config.prices)
        self._budget_stop = False
        self.taken_over = False
        """Another process took this turn over while this runner drove it: it wrote nothing
        more, and nobody here may end the turn."""

    @property
    def turn_id(self) -> str:
        """The id of the turn this runner drives ("" before it is known)."""
        return self._turn_id

    @property
    def turn(self) -> Turn | None:
        """The turn once the runner has finished it (ended, or paused for the client)."""
        return self._rec.turn if self._rec is not None else None

    @property
    def _r(self) -> TurnRecorder:
        assert self._rec is not None
        return self._rec

    @property
    def _calls(self) -> ToolRound:
        assert self._round is not None
        return self._round

    def _bind(self, rec: TurnRecorder) -> TurnRecorder:
        """Make ``rec`` the turn's recorder, with the tool round that writes through it."""
        cfg = self.config
        sampler = TurnSampler(self._meter, lambda: self._speaking.provider, lambda: self._r, lambda: self._step,
                              max_tokens=cfg.limits.max_tokens, retry=cfg.limits.retry)
        self._round = ToolRound(self.store, rec, self._tools, RoundSettings(
            limits=cfg.limits, approver=cfg.approver, deps=cfg.deps, telemetry=cfg.telemetry, sampler=sampler))
        self._rec = rec
        return rec

    # -- public ----------------------------------------------------------------------------

    async def run(self, session_id: str, user_input: str, *,
                  client_tools: list[dict[str, Any]] | None = None, history: Sequence[Turn] | None = None,
                  attachments: Sequence[Attachment] = ()) -> Turn:
        """Start a turn and drive it until control returns to the user.

        ``history``: the session's earlier turns when the caller knows them (``[]`` for a
        session it has just created); None reads them from the store. ``attachments``: the
        images and files of the input, already stored (``content.store_parts``); they become
        the turn's first block, a ``user`` block of step 0."""
        self._task = asyncio.current_task()
        if self._cancel_requested:
            raise TurnCancelled("the turn was cancelled before it started")
        start = TurnStart(session_id=session_id, n=1)

        def first_event(turn_id: str) -> StoredEvent:  # turn_start is stored with the turn
            start.turn_id = turn_id
            return StoredEvent.of(start)

        turn = await self.store.create_turn(session_id, user_input, model=self.config.provider.origin,
                                            client_tools=client_tools, first_event=first_event)
        self._turn_id = turn.id
        self._bind(TurnRecorder(self.store, turn.id, session_id, user_input=user_input,
                                model=self.config.provider.origin, n=start.n, on_event=self.on_event))
        self._add_client_tools(client_tools or [])
        if self.on_event is not None:
            self.on_event(start)

        async def prelude() -> bool:
            if attachments:
                await self._r.add_block(UserBlock(seq=0, step=0, attachments=list(attachments)))
            turns = history
            if turns is None:
                turns = [t for t in await self.store.list_turns(session_id) if t.id != turn.id]
            self._history = [(t.input, t.blocks) for t in turns]
            return False

        return await self._drive(prelude)

    async def resume(self, turn_id: str) -> Turn:
        """Continue a turn whose pending tool results have all arrived (see
        ``lifecycle.submit_tool_result``). ``TurnNotWaiting`` when it is not waiting (another
        request or process continued it first)."""
        self._task = asyncio.current_task()
        if self._cancel_requested:
            raise TurnCancelled("the turn was cancelled before it continued")
        if not await self.store.claim_turn(turn_id, "awaiting_client", "running"):
            turn = await self.store.get_turn(turn_id)
            raise TurnNotWaiting(turn_id, turn.status if turn else "deleted")
        self._turn_id = turn_id

        async def prelude() -> bool:
            rec = await self._load_context()
            self._step = rec.steps
            approved = {k: a.answer for k, a in (await approvals_given(self.store, turn_id)).items() if a.approved}
            events = await self.store.events_after(turn_id, 0)
            if await self._meter.on_resume(rec, events, set(approved)) == "declined":
                self._final_step = self._budget_stop = True
            return await self._calls.run_pending(approved)

        return await self._drive(prelude)

    async def take_over(self, turn_id: str) -> Turn:
        """Continue a running turn whose runner died, from what the store holds (the store
        of this runner has adopted it: ``Store.adopt_turns``).

        Where the turn stood decides what happens. The last step's calls all answered: the
        loop goes on with the next step. Calls of the last step that had started (the
        tool-effect ledger says so): one that ended (its result is in the ledger) keeps its
        result; one that had not ended runs again if its tool is idempotent, with the same
        idempotency key, and otherwise waits for the user's approval, the request saying
        that the call may already have run. Calls that never started are decided afresh, as
        they are when the step's stream had ended (its ``usage`` event is stored) and none
        of its calls had started. Anything else (a step that was streaming, whose end is
        unknown) is requested again, announced with ``step_restart`` as a broken stream is."""
        self._task = asyncio.current_task()
        if self._cancel_requested:
            raise TurnCancelled("the turn was cancelled before it was taken over")
        self._turn_id = turn_id

        async def prelude() -> bool | StepEnded:
            rec = await self._load_context()
            rec.n += TAKEOVER_GAP
            last = rec.steps
            self._step = last
            unanswered = rec.unanswered()
            started = {c.tool_use_id: c for c in await self.store.tool_calls(turn_id)}
            if unanswered and any(c.tool_use_id in started for c in unanswered):
                return await self._calls.resume_calls(unanswered, started)
            events = [e.event() for e in await self.store.events_after(turn_id, 0)]
            # The highest step that began streaming (a step with no finished block yet has
            # only its step_start stored), and whether the last one with blocks had ended.
            began = max((ev.step for ev in events if isinstance(ev, StepStart)), default=0)
            usage = next((ev.usage for ev in events if isinstance(ev, StepUsage) and ev.step == last), None)
            if unanswered and usage is not None and began <= last:
                # The step's stream ended; the process stopped before any of its calls started.
                self._final_step = last > self.config.limits.max_steps
                return StepEnded(unanswered, "tool_use", await self._meter.charge(rec, last, usage))
            last_calls = [b for b in rec.blocks if isinstance(b, ToolUseBlock) and b.step == last]
            if last_calls and not unanswered and began <= last:
                return False  # the step ended and its calls are answered: the next one starts
            step = max(last, began)
            if step:
                await self.store.discard_step(turn_id, step)
                rec.blocks = [b for b in rec.blocks if b.step != step]
                self._step = step - 1
                await rec.emit(StepRestart(step=step, reason=RESTARTED))
            return False

        return await self._drive(prelude)

    def abandon(self) -> None:
        """Stop driving the turn without ending it (a server shutting down gracefully): the
        turn stays ``running`` for another process, or the next start, to take over."""
        self._abandon = True
        self.cancel()

    def cancel(self) -> None:
        """Stop the stream and the tools; the turn ends ``cancelled`` with a valid transcript.
        Before the runner has started, it makes ``run``/``resume`` refuse to start."""
        self._cancel_requested = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _load_context(self) -> TurnRecorder:
        """Load a turn this runner continues: its blocks, client tools and earlier turns."""
        rec = await self._load()
        self._add_client_tools(await self.store.client_tools(rec.turn_id))
        self._history = [(t.input, t.blocks) for t in await self.store.list_turns(rec.session_id)
                         if t.id != rec.turn_id]
        return rec

    async def _load(self) -> TurnRecorder:
        """The recorder of a turn this runner continues, loaded from the store once."""
        if self._rec is None:
            rec = await TurnRecorder.load(self.store, self._turn_id, on_event=self.on_event)
            if rec is None:
                raise TurnNotWaiting(self._turn_id, "deleted")
            self._bind(rec)
        return self._r

    async def _list_toolsets(self) -> None:
        """The toolsets' tools as they are now (each answers from its cache unless its tools changed)."""
        if not self._toolsets:
            return
        for name in self._from_toolsets:
            self._tools.pop(name, None)
        self._from_toolsets = {}
        for toolset in self._toolsets:
            for t in await toolset.list_tools():
                self._tools.setdefault(t.name, t)
                self._from_toolsets.setdefault(t.name, t)

    def _add_client_tools(self, specs: list[dict[str, Any]]) -> None:
        for spec in specs:
            t = Tool.client(spec["name"], spec.get("description", ""), spec.get("input_schema"),
                            requires_approval=bool(spec.get("requires_approval", False)))
            self._tools[t.name] = t
            self._client_tools[t.name] = t

    # -- the loop --------------------------------------------------------------------------

    async def _drive(self, prelude: Prelude) -> Turn:
        """Run the loop after ``prelude`` (which loads what the turn needs, and may run the
        calls it resumes; True when the turn then waits for the client, a ``StepEnded`` when
        the loop goes on from the end of a step whose calls are not decided yet)."""
        tel = self.config.telemetry
        if tel is None:
            return await self._loop(prelude)
        with tel.invoke_agent(self._turn_id, self.config.provider) as run:
            turn = await self._loop(prelude)
            run.done(turn)
            return turn

    async def _loop(self, prelude: Prelude) -> Turn:
        """``_drive`` itself, inside the ``invoke_agent`` span when telemetry is on."""
        try:
            await self._list_toolsets()
            loaded = await prelude()
            if loaded is True:
                return await self._finish("awaiting_client", "awaiting_client")
            ended = loaded if isinstance(loaded, StepEnded) else None
            while True:
                if ended is None:
                    if self._step and self.config.take_queued:
                        await self._model_step.take_queued(self._r, self._step)
                    self._step += 1
                    await self._list_toolsets()
                    asm = await self._stream_step()
                    assert asm.stop_reason is not None
                    ended = StepEnded([b for b in asm.finished if isinstance(b, ToolUseBlock)], asm.stop_reason,
                                      await self._meter.after_step(self._r, self._step, asm.usage))
                calls, stop, reached, ended = ended.calls, ended.stop, ended.reached, None
                if not calls:
                    if stop == "pause_turn" and not self._final_step and self._step < self.config.limits.max_steps:
                        continue
                    invalid = self._invalid_output()
                    if invalid == "":
                        continue  # the one repair round: the model is told what was wrong
                    if invalid is not None:
                        err = ErrorEvent(code="output_invalid", message=invalid, retryable=False)
                        return await self._close_out(STREAM_FAILED.format(reason="invalid output"), "failed", err)
                    final: TurnStopReason = "budget" if self._budget_stop else "max_steps"
                    return await self._finish("complete", final if self._final_step else stop)
                if self._final_step or self._step >= self.config.limits.max_steps:
                    msg = BUDGET_SPENT if self._budget_stop else LIMIT_REACHED.format(n=self.config.limits.max_steps)
                    for c in calls:
                        await self._r.add_result(c, msg, True)
                    if self._final_step:
                        return await self._finish("complete", "budget" if self._budget_stop else "max_steps")
                    self._final_step = True
                    continue
                if reached is not None:
                    if await self._calls.stop_for_budget(calls, reached, self._meter):
                        return await self._finish("awaiting_client", "awaiting_client")
                    self._final_step = self._budget_stop = True  # the calls were answered as not run
                    continue
                if await self._calls.run_calls(calls, stop, step=self._step, max_tokens=self._model_step.max_tokens):
                    return await self._finish("awaiting_client", "awaiting_client")
                answered = self._answered(calls)
                if answered == "":
                    return await self._finish("complete", "end_turn")
                if answered is not None:
                    err = ErrorEvent(code="output_invalid", message=answered, retryable=False)
                    return await self._close_out(STREAM_FAILED.format(reason="invalid output"), "failed", err)
        except asyncio.CancelledError:
            if self._abandon:
                log.info("turn %s: left running for another process to take over", self._turn_id)
                raise
            ours = self._absorb_cancel()
            turn = await shielded(self._close_out(CANCELLED, "cancelled", None))
            if not ours:
                raise
            return turn
        except TurnTakenOver:
            self.taken_over = True
            log.warning("turn %s: another process took it over; this one stops", self._turn_id)
            raise
        except ProviderError as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("turn %s failed: %s", self._turn_id, reason)
            err = ErrorEvent(code=exc.code, message=str(exc), retryable=exc.retryable)
            return await self._close_out(STREAM_FAILED.format(reason=reason), "failed", err)
        except StoreWriteError as exc:
            log.warning("turn %s: %s", self._turn_id, exc)
            return await self._store_failed(exc)
        except Exception as exc:
            # A bug or a failing dependency (an approver, the store): the turn still ends
            # `failed` with its blocks and a valid transcript, if the store lets us write.
            log.exception("turn %s failed unexpectedly", self._turn_id)
            err = ErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}", retryable=False)
            return await self._close_out(STREAM_FAILED.format(reason="internal error"), "failed", err)

    async def _speaker(self) -> Persona:
        """The agent that runs this step (a team's conductor decides, at the step boundary)."""
        if self._conductor is None or self.config.team is None:
            return self._speaking
        rec = self._r
        p = await self._conductor.speaker(rec.session_id, rec.blocks, self._step)
        rec.agent = p.name
        self._tools.clear()
        self._tools.update({t.name: t for t in self.config.team.tools_of(p.name)})
        for t in self._from_toolsets.values():  # MCP servers' tools are every agent's
            self._tools.setdefault(t.name, t)
        self._tools.update(self._client_tools)
        return p

    def _answered(self, calls: Sequence[ToolUseBlock]) -> str | None:
        """After a step's calls ran, for a speaker answering through the answer tool: "" when
        one of them gave a valid answer (the turn is over), the error when a second answer was
        invalid (the first one's ``is_error`` result was its repair round), else None."""
        if self._speaking.output is None or self._speaking.output_via != "tool":
            return None
        results = {b.tool_use_id: b for b in self._r.blocks if isinstance(b, ToolResultBlock) and b.step == self._step}
        for c in calls:
            result = results.get(c.tool_use_id)
            if c.name != OUTPUT_TOOL or result is None:
                continue
            if not result.is_error:
                return ""
            self._bad_answers += 1
            if self._bad_answers > 1:
                return result.content
        return None

    def _invalid_output(self) -> str | None:
        """For a speaker with an ``output`` model, after a final answer: None when it is
        valid (or none is asked for), "" when the repair round starts, else the error. An
        answer tool's speaker that answered in text instead is held to the same rule (a text
        that is a valid document is taken as the answer)."""
        model = self._speaking.output
        if model is None:
            return None
        error = problem(model, answer_text(self._r.blocks, self._step))
        if error is None:
            return None
        if self._speaking.output_via == "tool":
            error = NO_ANSWER_CALL
        if self._repair.used or self._step >= self.config.limits.max_steps:
            return error
        self._repair.ask(self._step, model, error, via=self._speaking.output_via)
        return ""

    async def _stream_step(self) -> Assembler:
        """The step: the speaker decided at its boundary (a team's conductor picks it), then
        one provider call, restarted from the same transcript when its stream breaks."""
        rec = self._r
        sp = self._speaking = await self._speaker()
        if self.config.team is not None:
            self._meter.use(sp.provider.origin, self.config.prices)
        return await self._model_step.run(rec, self._step, sp, self._tools, history=self._history,
                                          repair=self._repair, final=self._final_step)

    async def _store_failed(self, exc: StoreWriteError) -> Turn:
        """A write failed (disk full, the database gone or restarting). The turn is held:
        its listeners are told at once (a live ``error`` event, not stored: the store is
        what fails), and the turn is ended ``failed`` from what the store holds as soon as
        the store takes writes again (what was streaming and not stored is dropped, calls
        without a stored result get an error result). A cancel while it waits makes it end
        ``cancelled`` instead; the wait ends only when the turn has ended, or is gone."""
        cause = exc.__cause__ or exc
        reason = f"{type(cause).__name__}: {cause}".strip()
        err = ErrorEvent(code="store_error", message=f"the turn could not be stored: {reason}", retryable=True)
        self._model_step.current = None
        rec = self._r
        if self.on_event is not None:
            rec.n += 1
            self.on_event(ErrorEvent(code="store_unavailable", retryable=True, turn_id=self._turn_id, n=rec.n,
                                     message="the database does not take writes now; this turn is held and "
                                             "ends as soon as it does"))
        status: TurnStatus = "failed"
        delay = 0.05
        while True:
            try:
                turn = await self.store.get_turn(self._turn_id)
                if turn is None:
                    raise exc  # the turn is gone (its session was deleted meanwhile)
                if turn.status != "running":  # its end was stored after all
                    rec.turn = turn
                    return turn
                rec.blocks = list(turn.blocks)  # a block whose write failed may be missing
                rec.n = max(rec.n, await self.store.last_event_n(self._turn_id))
                if status == "cancelled":
                    return await rec.close_out(CANCELLED, "cancelled", None, steps=self._step)
                return await rec.close_out(STORE_FAILED.format(reason=reason), "failed", err, steps=self._step)
            except asyncio.CancelledError:
                if not self._absorb_cancel():
                    raise
                status = "cancelled"
                continue
            except TurnTakenOver:
                raise
            except Exception as again:  # the store still fails (a driver error, a closed pool)
                log.info("turn %s: the store still fails (%s: %s); retrying", self._turn_id,
                         type(again).__name__, again)
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                if not self._absorb_cancel():
                    raise
                status = "cancelled"
            delay = min(delay * 2, STORE_RETRY_MAX)

    def _absorb_cancel(self) -> bool:
        """Whether the ``CancelledError`` being handled is this turn's own ``cancel()`` (not a cancel
        from outside, nor the abandon of a hand-over); if it is, the task is uncancelled, so that the
        clean-up that follows can wait on the store."""
        if not self._cancel_requested or self._abandon:
            return False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    async def _close_out(self, reason: str, status: TurnStatus, err: ErrorEvent | None) -> Turn:
        """End a turn that did not finish normally, keeping a valid transcript: the blocks
        that were streaming are closed as they stand, then ``TurnRecorder.close_out``."""
        rec = await self._load()
        asm = self._model_step.current
        if asm is not None and not asm.ended:
            for stop in asm.close_all_open():
                assert stop.block is not None
                rec.blocks.append(stop.block)
                await rec.emit(stop)
        notes = self._round.executor.cancel_notes if self._round is not None else None
        return await rec.close_out(reason, status, err, steps=self._step, notes=notes)

    async def _finish(self, status: TurnStatus, stop_reason: TurnStopReason) -> Turn:
        return await self._r.finish(status, stop_reason, steps=self._step)


__all__ = ["CANCELLED", "CUT_OFF", "LIMIT_REACHED", "MAY_HAVE_RUN", "REPEATED", "STREAM_FAILED", "Prelude",
           "RunConfig", "StepEnded", "TurnRunner"]
