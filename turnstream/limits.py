"""Every limit of a turn in one object, with its documented default."""

from __future__ import annotations

from dataclasses import dataclass, field

from .retry import RetryPolicy


@dataclass(slots=True)
class Limits:
    max_steps: int = 10
    """Provider calls per turn; the calls of the last one are not run, and one more call
    with tools disabled produces the answer (``stop_reason: max_steps``)."""
    max_identical_calls: int = 2
    """The same tool with the same arguments runs at most this often per turn."""
    max_result_chars: int = 100_000
    """Longer tool results are truncated, with a note saying so."""
    max_tokens: int = 8192
    """``max_tokens`` of each provider call."""
    max_tokens_ceiling: int = 64_000
    """A step whose tool call was cut off by ``max_tokens`` is retried once with double the
    limit, up to this ceiling."""
    stream_restarts: int = 2
    """How often a step whose stream broke after it started is restarted from the same transcript."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
