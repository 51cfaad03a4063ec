"""A model call a running tool asks for: the turn's own model, answering an MCP server's
``sampling/createMessage`` (``mcp/sampling.py``) while one of its tools runs.

``TurnSampler`` is what the runner hands each call (``ToolContext.sampler``): a plain
request to the model the turn speaks with (no tools, no thinking, the server's messages and
system prompt, at most the turn's ``max_tokens``), retried like a step before its first
event. Its usage joins the turn's and is metered as a sub-step of the step whose call asked
(``Meter.sub_step``: a ``usage`` event carrying the call's ``tool_use_id``, charged to the
budgets like a step). When the server reports no token counts, the budgets are charged an
estimate from the characters read and written, as for a step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING

from .blocks import StopReason, TextBlock, Usage
from .budgets import CHARS_PER_TOKEN
from .providers.base import Delta, Message, ModelRequest, StepEnded
from .retry import RetryPolicy, stream_with_retries
from .tools.sampler import Sampled, SampleTurn

if TYPE_CHECKING:
    from .budgets import Meter
    from .lifecycle import TurnRecorder
    from .providers.base import Provider


class TurnSampler:
    """The turn's model for the calls its tools ask for (a ``tools.sampler.Sampler``).
    ``provider``, ``recorder`` and ``step`` are read at each call (a team's speaker changes; a
    step moves on)."""

    def __init__(self, meter: Meter, provider: Callable[[], Provider], recorder: Callable[[], TurnRecorder],
                 step: Callable[[], int], *, max_tokens: int, retry: RetryPolicy) -> None:
        self._meter = meter
        self._provider = provider
        self._recorder = recorder
        self._step = step
        self.max_tokens = max_tokens
        self._retry = retry

    async def complete(self, tool_use_id: str, turns: Sequence[SampleTurn], *, system: str | None,
                       max_tokens: int) -> Sampled:
        """Ask the model; ``ProviderError`` when it cannot answer."""
        provider = self._provider()
        messages = [Message("user", [t.text]) if t.role == "user" else Message("assistant", [TextBlock(text=t.text)])
                    for t in turns]
        request = ModelRequest(model=provider.model, messages=messages, system=system, tools=[],
                               tool_choice="none", max_tokens=max(1, min(max_tokens, self.max_tokens)))
        parts: list[str] = []
        stop: StopReason
        usage, stop = Usage(), "end_turn"
        async with aclosing(stream_with_retries(provider, request, self._retry)) as events:
            async for ev in events:
                if isinstance(ev, Delta) and ev.kind == "text" and isinstance(ev.value, str):
                    parts.append(ev.value)
                elif isinstance(ev, StepEnded):
                    usage, stop = ev.usage, ev.stop_reason
        text = "".join(parts)
        rec = self._recorder()
        rec.usage = rec.usage + usage
        read = len(system or "") + sum(len(t.text) for t in turns)
        estimate = Usage(input_tokens=-(-read // CHARS_PER_TOKEN), output_tokens=-(-len(text) // CHARS_PER_TOKEN))
        await self._meter.sub_step(rec, self._step(), usage, tool_use_id, estimate)
        return Sampled(text, provider.origin, stop, usage)


__all__ = ["TurnSampler"]
