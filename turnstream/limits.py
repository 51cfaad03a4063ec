"""Every limit of a turn in one object, with its documented default."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

from .content import MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS
from .retry import RetryPolicy


def usd(amount: str | int) -> int:
    """Dollars (``"0.50"``) as the nano-dollars a ``Ceiling`` holds."""
    nano = Decimal(str(amount)) * 1_000_000_000
    if nano < 0 or nano != nano.to_integral_value():
        raise ValueError(f"{amount!r} is not an amount of dollars down to the nano-dollar")
    return int(nano)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """How much one scope (a turn, a session, a user's day) may spend; None is no limit."""

    tokens: int | None = None
    """Tokens processed: every input token (cached or not) and every output token."""
    nano_usd: int | None = None
    """Cost in nano-dollars (``usd("0.50")``), priced by ``turnstream.pricing``."""

    @property
    def set(self) -> bool:
        return self.tokens is not None or self.nano_usd is not None


@dataclass(frozen=True, slots=True)
class Budgets:
    """Spending ceilings, counted in the store so that every process sees the same totals
    (docs/budgets.md). Checked after each step: a turn over a ceiling runs no more tools
    until the user approves more, or (``on_limit="answer"``) answers at once with tools off."""

    turn: Ceiling = Ceiling()
    session: Ceiling = Ceiling()
    user_day: Ceiling = Ceiling()
    """Per user and UTC day, over all of the user's sessions and processes."""
    warn_at: float = 0.8
    """A ``budget_warning`` event when a scope's spending first reaches this fraction of its ceiling."""
    on_limit: Literal["ask", "answer"] = "ask"
    """``ask``: the turn pauses ``awaiting_client`` with an approval request per pending call;
    approving continues with another ceiling's worth, denying ends with a tools-off answer.
    ``answer``: the pending calls are not run and one more call, tools off, ends the turn."""

    @property
    def active(self) -> bool:
        return self.turn.set or self.session.set or self.user_day.set


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
    max_attachment_bytes: int = MAX_ATTACHMENT_BYTES
    """The largest image or PDF in a message or a tool result."""
    max_attachments: int = MAX_ATTACHMENTS
    """The most images and files in one message or tool result."""
    budgets: Budgets = field(default_factory=Budgets)
    """Token and cost ceilings per turn, session and user-day (none by default)."""
    context_tokens: int | None = None
    """The model's context window in tokens for a model ``turnstream.context.windows`` does not
    list (128,000 when None); a listed model keeps its own."""
    context_fraction: float = 0.8
    """Past this share of the context window (less the step's ``max_tokens``) the oldest tool
    results are cleared from the request (docs/context.md)."""
