"""The step: one model call of a turn (SPEC §3).

``ModelStep.run`` builds the request from the transcript (the session's earlier turns, this
turn's blocks, the speaker's system prompt and tools, the attachments' bytes), streams the
answer through the ``Assembler`` into the turn's recorder (every event emitted, every
finished block kept), and requests the step again from the same transcript when the stream
breaks after it began, or once, with a larger ``max_tokens``, when a tool call was cut off.
Before it is sent, the request is fitted to the model's context window (``context.ContextFit``,
one per model that speaks: old tool results cleared, announced with ``context_managed``); a
refusal as too long before the stream began restarts the step once, fitted again.
At the step boundary ``take_queued`` adds the messages the user sent meanwhile.

What happens with the step's calls and stop reason is the conductor's decision
(``loop.TurnRunner``); the step hands them back as an ended ``Assembler``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..agents import Persona, thinking_allowed
from ..assemble import Assembler
from ..blocks import Block, CompactionBlock, StopReason, ToolResultBlock, ToolUseBlock, Usage, UserBlock
from ..budgets import CHARS_PER_TOKEN, Meter
from ..context.compaction import conversation_text, plan, summarise
from ..context.fit import MIN_OUTPUT, ContextFit
from ..context.overflow import is_context_overflow
from ..errors import ProviderError, StreamBrokenError
from ..events import BlockDelta, BlockStart, BlockStop, BudgetReached, ContextManaged, StepRestart, StepStart
from ..lifecycle import TurnRecorder
from ..limits import Limits
from ..output import PartialOutputs, Repair, output_format
from ..providers.base import Message, ModelRequest, Provider, ProviderEvent, ToolSpec
from ..retry import stream_with_retries
from ..store.protocol import Store
from ..tools.tool import Tool
from ..transcript import build, latest_compaction

if TYPE_CHECKING:
    from ..telemetry.otel import Telemetry

log = logging.getLogger("turnstream.loop")  # the loop's log, as before the phases had modules of their own

History = Sequence[tuple[str, Sequence[Block]]]
"""The session's earlier turns, as ``transcript.build`` reads them: (user input, blocks)."""


@dataclass(slots=True)
class StepSettings:
    """What the step takes from the turn's configuration (``loop.RunConfig``)."""

    limits: Limits = field(default_factory=Limits)
    live_deltas: bool = True
    """Emit ``block_delta`` events; off, only the finished blocks are emitted."""
    telemetry: Telemetry | None = None
    prompt_cache_key: str | None = None
    """None: one per session, from its id."""
    team: bool = False
    """Several agents speak: thinking is asked for only where the transcript allows it."""
    meter: Meter | None = None
    """Charges a summary's model call (compaction) to the budgets, as a sub-step."""


@dataclass(slots=True)
class StepEnded:
    """A step whose stream has ended: its calls, its stop reason, and the budget scope it
    brought to its ceiling (None when none). The conductor decides what happens next from it."""

    calls: list[ToolUseBlock]
    stop: StopReason
    reached: BudgetReached | None


class ModelStep:
    """The model calls of one turn, step after step."""

    def __init__(self, store: Store, settings: StepSettings) -> None:
        self.store = store
        self.settings = settings
        self.max_tokens = settings.limits.max_tokens
        """The output limit in force: raised, up to ``max_tokens_ceiling``, when a call was cut off."""
        self.current: Assembler | None = None
        """The assembler of the stream in progress (its open blocks are closed if the turn ends)."""
        self._media: dict[str, bytes] = {}
        """The bytes of the attachments sent so far, by hash (read from the store once)."""
        self._fits: dict[str, ContextFit] = {}
        """The context policy per model (``provider:model``) that spoke in this turn."""

    def context_fit(self, origin: str, session_id: str) -> ContextFit:
        fit = self._fits.get(origin)
        if fit is None:
            fit = self._fits[origin] = ContextFit(origin, self.settings.limits, session_id)
        return fit

    async def run(self, rec: TurnRecorder, step: int, speaker: Persona, tools: Mapping[str, Tool], *,
                  history: History, repair: Repair, final: bool) -> Assembler:
        """Step ``step``: one provider call, restarted from the same transcript when its
        stream breaks. ``final``: tools off (``tool_choice="none"``); ``repair``: the answer
        is asked for again (``output.Repair``). The assembler it returns has ended."""
        cfg, limits = self.settings, self.settings.limits
        live = cfg.live_deltas
        restarts = 0
        cut_retry_done = False
        refused = False
        """The provider refused this step's request as too long (it is fitted again, once)."""
        sp = speaker
        provider = sp.provider
        while True:
            await rec.emit(StepStart(step=step, max_steps=limits.max_steps))
            fit = self.context_fit(provider.origin, rec.session_id)
            transcript, request = await self._request(rec, step, sp, tools, history, repair, final, fit, refused)
            taken = {b.tool_use_id for _, blocks in transcript for b in blocks if isinstance(b, ToolUseBlock)}
            asm = Assembler(step=step, first_seq=len(rec.blocks), origin=provider.origin,
                            provider=provider.name, snapshots=live, taken_ids=taken)
            self.current = asm
            partial = (PartialOutputs() if sp.output is not None and sp.output_via == "native" and live
                       else None)  # through the tool, the call's input deltas carry the partial objects
            started = False
            stream: AsyncGenerator[ProviderEvent, None] = stream_with_retries(provider, request, limits.retry)
            if cfg.telemetry is not None:
                stream = cfg.telemetry.chat(stream, request, provider)
            try:
                async with aclosing(stream) as events:
                    async for pev in events:
                        started = True
                        out = asm.feed(pev)
                        if out is None:
                            continue
                        if partial is not None and isinstance(out, BlockStart | BlockDelta):
                            partial.see(out)
                        if type(out) is BlockDelta:
                            if live:
                                await rec.emit(out)
                        elif type(out) is BlockStop:
                            assert out.block is not None
                            rec.blocks.append(out.block)
                            await rec.emit(out)
                        else:
                            await rec.emit(out)
                if not asm.ended:
                    raise StreamBrokenError("the stream ended without its final event", retryable=True)
                for stop in asm.close_all_open():  # e.g. a tool call cut off by max_tokens
                    assert stop.block is not None
                    rec.blocks.append(stop.block)
                    await rec.emit(stop)
            except ProviderError as exc:
                if not started and is_context_overflow(exc):
                    if refused:  # fitted again and still refused
                        raise fit.too_long(exc, provider.model) from exc
                    refused = True
                    fit.refused(exc, provider.origin)
                    await self.restart(rec, step, "the model refused the request as too long; "
                                                  "clearing old tool results and asking again")
                    continue
                if not (started and exc.retryable and restarts < limits.stream_restarts):
                    raise
                restarts += 1
                await self.restart(rec, step, f"{type(exc).__name__}: {exc}")
                continue
            rec.usage = rec.usage + asm.usage
            rec.step_usage.append(asm.usage)
            fit.measured(asm.usage, provider.name)
            cut = [b for b in asm.finished if isinstance(b, ToolUseBlock) and b.input_error]
            if asm.stop_reason == "max_tokens" and cut and not cut_retry_done:
                cut_retry_done = True
                self.max_tokens = min(self.max_tokens * 2, limits.max_tokens_ceiling)
                await self.restart(rec, step, f"max_tokens: a tool call was cut off; retrying with "
                                              f"max_tokens={self.max_tokens}")
                continue
            if asm.stop_reason == "max_tokens" and cut:
                for b in cut:
                    b.input_error = f"cut off by max_tokens={self.max_tokens}"
            self.current = None
            return asm

    async def _request(self, rec: TurnRecorder, step: int, sp: Persona, tools: Mapping[str, Tool],
                       history: History, repair: Repair, final: bool, fit: ContextFit,
                       refused: bool) -> tuple[list[tuple[str, Sequence[Block]]], ModelRequest]:
        """The step's request, fitted to the model's context window: old tool results cleared,
        and, when that is not enough, the first turns summarised (once) and the request built
        again; what was done is announced by one ``context_managed``."""
        cfg, provider = self.settings, sp.provider
        summarised, before = 0, 0
        while True:
            transcript = [*history, (rec.user_input, rec.blocks)]
            messages = (repair.build(transcript, provider.origin) if repair.used
                        else build(transcript, provider.origin)[0])
            thinking = sp.thinking_budget if not cfg.team or thinking_allowed(messages) else None
            specs = [ToolSpec(t.name, t.description, t.input_schema) for t in tools.values()]
            request = ModelRequest(model=provider.model, messages=messages, system=sp.system, tools=specs,
                                   tool_choice="none" if final else "auto",
                                   max_tokens=self.max_tokens, thinking_budget=thinking,
                                   output=(output_format(sp.output) if sp.output is not None
                                           and sp.output_via == "native" else None),
                                   media=await self.media_of(messages),
                                   cache_key=cfg.prompt_cache_key if cfg.prompt_cache_key is not None
                                   else f"turnstream-{rec.session_id}")
            managed = fit.fit(request, step, refused=refused)
            before = before or fit.before
            if summarised or not fit.over:
                break
            summarised = await self.compact(rec, step, provider, transcript, fit)
            if not summarised:
                break
        if summarised:
            managed = ContextManaged(step=step, cleared=managed.cleared if managed is not None else [],
                                     tokens_before=before, tokens_after=fit.after, window=fit.window,
                                     retry=refused, summarised=summarised)
        if managed is not None:
            await rec.emit(managed)
        return transcript, request

    async def compact(self, rec: TurnRecorder, step: int, provider: Provider,
                      transcript: Sequence[tuple[str, Sequence[Block]]], fit: ContextFit) -> int:
        """Summarise the conversation's first turns (``context/compaction.py``) into a
        ``compaction`` block of this turn, metered as a sub-step; how many turns the summary now
        stands for, or 0 when there is nothing more to summarise or the model did not answer."""
        covered, previous = latest_compaction(transcript)
        covers = plan(len(transcript) - 1, covered)
        if covers is None:
            return 0
        text = conversation_text(transcript[covered:covers], previous,
                                 int(fit.window // 2 * fit.estimator.chars_per_token))
        try:
            summary, usage = await summarise(provider, text, max_tokens=max(MIN_OUTPUT, min(2048, fit.window // 8)),
                                             retry=self.settings.limits.retry)
        except ProviderError as exc:
            log.warning("turn %s: the summary of its first %d turns failed: %s", rec.turn_id, covers, exc)
            return 0
        if not summary:
            return 0
        rec.usage = rec.usage + usage
        if self.settings.meter is not None:
            estimate = Usage(input_tokens=-(-len(text) // CHARS_PER_TOKEN),
                             output_tokens=-(-len(summary) // CHARS_PER_TOKEN))
            await self.settings.meter.sub_step(rec, step, usage, None, estimate)
        # Filed under the step before this one, so that a restart of this step (which drops
        # its blocks) keeps it.
        await rec.add_block(CompactionBlock(seq=len(rec.blocks), step=max(0, step - 1), summary=summary,
                                            covers=covers))
        return covers

    async def restart(self, rec: TurnRecorder, step: int, reason: str) -> None:
        """Drop what step ``step`` wrote (kept and stored) and announce it is requested again."""
        log.info("turn %s step %d restarts: %s", rec.turn_id, step, reason)
        rec.blocks = [b for b in rec.blocks if b.step != step]
        await self.store.discard_step(rec.turn_id, step)
        await rec.emit(StepRestart(step=step, reason=reason))

    async def media_of(self, messages: Sequence[Message]) -> dict[str, bytes]:
        """The bytes of every attachment in ``messages``, read from the store once per turn."""
        refs = {a.sha256 for m in messages for b in m.blocks
                if isinstance(b, UserBlock | ToolResultBlock) for a in b.attachments}
        if unknown := refs - self._media.keys():
            self._media.update(await self.store.get_blobs(unknown))
        return {h: self._media[h] for h in refs if h in self._media}

    async def take_queued(self, rec: TurnRecorder, step: int) -> None:
        """The step boundary: the messages the user sent while the turn ran become user
        blocks of step ``step``, which just ended (after its results), so the next step reads them."""
        for msg in await self.store.take_queued(rec.session_id):
            await rec.add_block(UserBlock(seq=len(rec.blocks), step=step, text=msg.text,
                                          attachments=msg.attachments))


__all__ = ["History", "ModelStep", "StepEnded", "StepSettings"]
