"""TurnRunner: the loop (SPEC §3). The only place that decides to call the model again.

One runner drives one turn, from a new user message (``run``), from the moment its last
pending tool result arrived (``resume``), or from what the store holds when the process that
drove it died (``take_over``). All state lives in the store, so any process can continue a
turn that another one started. Events are numbered, persisted (all but deltas), then handed
to ``on_event``.

The runner conducts; the phases it calls each own their work (``turnstream/phases``): the
step (``ModelStep``: the request, the stream, its restarts), the tool round (``ToolRound``:
running, resuming and settling calls, the tool-effect ledger, approvals), picking a turn up
again (``after_pause``, ``after_takeover``, which set the turn's ``Course``), the tools in
force (``Toolbox``), the check of a structured answer (``AnswerCheck``) and the wait for a
failing store (``hold_until_stored``). ``RunConfig`` lives with the phases and is imported
from here as before. Every event goes through the turn's ``TurnRecorder``
(lifecycle.py), which stores it and then hands it on; every abnormal end goes through its
``close_out``.

Cancellation: ``cancel()`` is the whole contract. It cancels the task driving the turn (or,
before that task started, makes the runner refuse to start). The runner then closes what
is open (partial blocks kept, every unfinished tool call answered with an ``is_error``
result), marks the turn ``cancelled`` and emits ``turn_complete``. A cancellation that did
not come from ``cancel()`` gets the same clean-up, shielded, and is then re-raised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from . import branches
from .agents import Persona
from .aio import shielded
from .assemble import Assembler
from .blocks import Attachment, Block, ToolUseBlock, Turn, TurnStatus, TurnStopReason, UserBlock
from .budgets import BUDGET_SPENT, Meter
from .errors import ProviderError, StoreWriteError, TurnCancelled, TurnNotWaiting, TurnTakenOver
from .events import ErrorEvent, TurnStart
from .lifecycle import EventSink, TurnRecorder
from .output import output_tool
from .phases.answer import AnswerCheck
from .phases.config import RunConfig
from .phases.ending import CANCELLED, hold_until_stored
from .phases.resume import Course, after_pause, after_takeover
from .phases.step import ModelStep, StepEnded, StepSettings
from .phases.tool_round import CUT_OFF, MAY_HAVE_RUN, REPEATED, RoundSettings, ToolRound
from .phases.toolbox import Toolbox
from .sampling import TurnSampler
from .store.protocol import Store, StoredEvent
from .tools.toolset import split_tools

log = logging.getLogger("turnstream.loop")

LIMIT_REACHED = ("Not run: the step limit of this turn (max_steps={n}) was reached. "
                 "Answer now with what you have.")
STREAM_FAILED = "Not run: the response stream failed before this call was final ({reason})."


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
        self._parent: str | None = None
        """The turn this one follows (its history is the path to it)."""
        self._course = Course()
        """The step, and whether the next one is the last."""
        plain, toolsets = split_tools(config.tools)
        answer_tool = output_tool(config.output) if config.output is not None and config.output_via == "tool" else None
        self._box = Toolbox(plain, toolsets, store, team=config.team, answer_tool=answer_tool)
        self._tools = self._box.tools
        self._speaking = Persona("", config.provider, config.system, plain, config.thinking_budget,
                                 config.output, output_via=config.output_via)
        self._answer = AnswerCheck(config.limits.max_steps)
        self._meter = Meter(store, config.limits.budgets, config.provider.origin, config.prices)
        self._model_step = ModelStep(store, StepSettings(
            limits=config.limits, live_deltas=config.live_deltas, telemetry=config.telemetry,
            prompt_cache_key=config.prompt_cache_key, team=config.team is not None, meter=self._meter))
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._abandon = False
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
        sampler = TurnSampler(self._meter, lambda: self._speaking.provider, lambda: self._r, lambda: self._course.step,
                              max_tokens=cfg.limits.max_tokens, retry=cfg.limits.retry)
        self._round = ToolRound(self.store, rec, self._tools, RoundSettings(
            limits=cfg.limits, approver=cfg.approver, deps=cfg.deps, telemetry=cfg.telemetry, sampler=sampler))
        self._rec = rec
        return rec

    # -- public ----------------------------------------------------------------------------

    async def run(self, session_id: str, user_input: str, *,
                  client_tools: list[dict[str, Any]] | None = None, history: Sequence[Turn] | None = None,
                  attachments: Sequence[Attachment] = (), parent_turn_id: str | None = None) -> Turn:
        """Start a turn and drive it until control returns to the user.

        ``parent_turn_id``: the turn it follows (docs/branches.md); None for the session's
        current leaf. ``history``: the turns it reads when the caller knows them (``[]`` for a
        session it has just created); None reads the path to its parent from the store.
        ``attachments``: the images and files of the input, already stored
        (``content.store_parts``); they become the turn's first block, a ``user`` block of step 0."""
        self._task = asyncio.current_task()
        if self._cancel_requested:
            raise TurnCancelled("the turn was cancelled before it started")
        start = TurnStart(session_id=session_id, n=1)

        def first_event(turn_id: str) -> StoredEvent:  # turn_start is stored with the turn
            start.turn_id = turn_id
            return StoredEvent.of(start)

        turn = await self.store.create_turn(session_id, user_input, model=self.config.provider.origin,
                                            client_tools=client_tools, first_event=first_event,
                                            parent_turn_id=parent_turn_id)
        self._turn_id, self._parent = turn.id, turn.parent_turn_id
        self._bind(TurnRecorder(self.store, turn.id, session_id, user_input=user_input,
                                model=self.config.provider.origin, n=start.n, on_event=self.on_event))
        self._box.add_client_tools(client_tools or [])
        if self.on_event is not None:
            self.on_event(start)

        async def prelude() -> bool:
            if attachments:
                await self._r.add_block(UserBlock(seq=0, step=0, attachments=list(attachments)))
            turns = history
            if turns is None:
                turns = branches.path(await self.store.list_turns(session_id), self._parent)
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
            return await after_pause(self.store, rec, self._calls, self._meter, self._course)

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
            return await after_takeover(self.store, rec, self._calls, self._meter, self._course,
                                        max_steps=self.config.limits.max_steps)

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
        """Load a turn this runner continues: its blocks, client tools and the path it follows."""
        rec = await self._load()
        self._box.add_client_tools(await self.store.client_tools(rec.turn_id))
        turns = await self.store.list_turns(rec.session_id)
        self._parent = next((t.parent_turn_id for t in turns if t.id == rec.turn_id), None)
        self._history = [(t.input, t.blocks) for t in branches.path(turns, self._parent)]
        return rec

    async def _load(self) -> TurnRecorder:
        """The recorder of a turn this runner continues, loaded from the store once."""
        if self._rec is None:
            rec = await TurnRecorder.load(self.store, self._turn_id, on_event=self.on_event)
            if rec is None:
                raise TurnNotWaiting(self._turn_id, "deleted")
            self._bind(rec)
        return self._r

    # -- the loop --------------------------------------------------------------------------

    async def _drive(self, prelude: Prelude) -> Turn:
        """Run the loop after ``prelude`` (which loads what the turn needs, and may run the
        calls it resumes; True when the turn then waits for the client, a ``StepEnded`` when
        the loop goes on from the end of a step whose calls are not decided yet)."""
        tel = self.config.telemetry
        if tel is None:
            turn = await self._loop(prelude)
        else:
            with tel.invoke_agent(self._turn_id, self.config.provider) as run:
                turn = await self._loop(prelude)
                run.done(turn)
        turn.parent_turn_id = self._parent
        return turn

    async def _loop(self, prelude: Prelude) -> Turn:
        """``_drive`` itself, inside the ``invoke_agent`` span when telemetry is on."""
        limits, course = self.config.limits, self._course
        try:
            await self._box.list_toolsets()
            loaded = await prelude()
            if loaded is True:
                return await self._finish("awaiting_client", "awaiting_client")
            ended = loaded if isinstance(loaded, StepEnded) else None
            while True:
                if ended is None:
                    if course.step and self.config.take_queued:
                        await self._model_step.take_queued(self._r, course.step)
                    course.step += 1
                    await self._box.list_toolsets()
                    asm = await self._stream_step()
                    assert asm.stop_reason is not None
                    ended = StepEnded([b for b in asm.finished if isinstance(b, ToolUseBlock)], asm.stop_reason,
                                      await self._meter.after_step(self._r, course.step, asm.usage))
                calls, stop, reached, ended = ended.calls, ended.stop, ended.reached, None
                if not calls:
                    if stop == "pause_turn" and not course.final_step and course.step < limits.max_steps:
                        continue
                    invalid = self._answer.after_text(self._speaking, self._r.blocks, course.step)
                    if invalid == "":
                        continue  # the one repair round: the model is told what was wrong
                    if invalid is not None:
                        err = ErrorEvent(code="output_invalid", message=invalid, retryable=False)
                        return await self._close_out(STREAM_FAILED.format(reason="invalid output"), "failed", err)
                    final: TurnStopReason = "budget" if course.budget_stop else "max_steps"
                    return await self._finish("complete", final if course.final_step else stop)
                if course.final_step or course.step >= limits.max_steps:
                    msg = BUDGET_SPENT if course.budget_stop else LIMIT_REACHED.format(n=limits.max_steps)
                    for c in calls:
                        await self._r.add_result(c, msg, True)
                    if course.final_step:
                        return await self._finish("complete", "budget" if course.budget_stop else "max_steps")
                    course.final_step = True
                    continue
                if reached is not None:
                    if await self._calls.stop_for_budget(calls, reached, self._meter):
                        return await self._finish("awaiting_client", "awaiting_client")
                    course.final_step = course.budget_stop = True  # the calls were answered as not run
                    continue
                if await self._calls.run_calls(calls, stop, step=course.step, max_tokens=self._model_step.max_tokens):
                    return await self._finish("awaiting_client", "awaiting_client")
                answered = self._answer.after_calls(self._speaking, self._r.blocks, course.step, calls)
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
            self._model_step.current = None
            return await hold_until_stored(self.store, self._r, exc, steps=course.step, on_event=self.on_event,
                                           absorb_cancel=self._absorb_cancel)
        except Exception as exc:
            # A bug or a failing dependency (an approver, the store): the turn still ends
            # `failed` with its blocks and a valid transcript, if the store lets us write.
            log.exception("turn %s failed unexpectedly", self._turn_id)
            err = ErrorEvent(code="internal_error", message=f"{type(exc).__name__}: {exc}", retryable=False)
            return await self._close_out(STREAM_FAILED.format(reason="internal error"), "failed", err)

    async def _stream_step(self) -> Assembler:
        """The step: the speaker decided at its boundary (a team's conductor picks it), then
        one provider call, restarted from the same transcript when its stream breaks."""
        rec, course = self._r, self._course
        if (chosen := await self._box.speaker(rec, course.step)) is not None:
            self._speaking = chosen
        sp = self._speaking
        if self.config.team is not None:
            self._meter.use(sp.provider.origin, self.config.prices)
        return await self._model_step.run(rec, course.step, sp, self._tools, history=self._history,
                                          repair=self._answer.repair, final=course.final_step)

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
        return await rec.close_out(reason, status, err, steps=self._course.step, notes=notes)

    async def _finish(self, status: TurnStatus, stop_reason: TurnStopReason) -> Turn:
        return await self._r.finish(status, stop_reason, steps=self._course.step)


__all__ = ["CANCELLED", "CUT_OFF", "LIMIT_REACHED", "MAY_HAVE_RUN", "REPEATED", "STREAM_FAILED", "RunConfig",
           "StepEnded", "TurnRunner"]
