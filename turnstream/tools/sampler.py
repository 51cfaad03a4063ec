"""What a running tool may ask the turn's model (``ToolContext.sampler``): the question as
plain text turns, the answer, and ``Sampler``, the one method that answers.

The runner hands each call a ``sampling.TurnSampler`` (a metered sub-step of the turn); the
tool side (``ToolContext``, the executor, ``mcp/``) sees only this protocol, so that the
tools need nothing of the runner's budgets and lifecycle, which themselves use the tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..blocks import StopReason, Usage


@dataclass(frozen=True, slots=True)
class SampleTurn:
    """One message of what a tool asks the model: who says it, and its text."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Sampled:
    """The model's answer: its text, the model (``provider:model``), why it stopped, its usage."""

    text: str
    model: str
    stop_reason: StopReason
    usage: Usage


class Sampler(Protocol):
    """The turn's model, for the calls its tools ask for."""

    async def complete(self, tool_use_id: str, turns: Sequence[SampleTurn], *, system: str | None,
                       max_tokens: int) -> Sampled:
        """Ask the model on behalf of the call ``tool_use_id``; ``ProviderError`` when it
        cannot answer."""
        ...


__all__ = ["SampleTurn", "Sampled", "Sampler"]
