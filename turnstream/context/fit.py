"""Fitting a step's request into the model's context window: the policy (docs/context.md).

Before each step the request's input is estimated (``estimate.py``), and its ``max_tokens``
kept to at most half the window. Past
``Limits.context_fraction`` of what the window leaves beside the step's ``max_tokens``, the
oldest tool results are cleared from it (``clearing.py``) until the estimate is back under
that line; the results the model has not read yet (the last step's) stay. After the step,
the provider's count of the request calibrates the next estimate. A request the provider
still refuses as too long is fitted again against half the line, once.

The rate (characters per token) a session measured is kept for its next turn, in this
process (``RATES``, the most recent sessions): a turn's first step then starts from the
conversation's own rate instead of the conservative one.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..blocks import ToolResultBlock, Usage
from ..errors import ContextTooLong, ProviderError
from ..events import ContextManaged
from ..limits import Limits
from ..providers.base import ModelRequest
from .clearing import clear_tool_results
from .estimate import TokenEstimator, request_chars
from .overflow import stated_window
from .windows import DEFAULT_CONTEXT_TOKENS, SEEN, context_window, input_budget

RATES: OrderedDict[str, float] = OrderedDict()
"""Characters per token measured per session and model (``ContextFit.key``), most recent last
(at most ``RATES_KEPT``)."""
RATES_KEPT = 10_000
MIN_OUTPUT = 256
"""The least ``max_tokens`` a fitted request asks for. A request never asks for more than half
the window (a default of 8,192 would leave a small local model's window nothing for the input)."""
_CACHED_IN_INPUT = ("openai", "openai-responses")
"""Providers whose ``input_tokens`` already counts the cached ones (as ``pricing.py`` says)."""


@dataclass(slots=True)
class Sent:
    """The size of the request last sent, for calibrating on its usage."""

    chars: int = 0
    attachments: int = 0


class ContextFit:
    """The context policy of one turn's steps."""

    def __init__(self, origin: str, limits: Limits, session_id: str) -> None:
        self.window = context_window(origin, limits.context_tokens or DEFAULT_CONTEXT_TOKENS)
        self.fraction = limits.context_fraction
        self.key = f"{origin} {session_id}"
        """Whose rate this is: a session's, with one model (each family counts its own way)."""
        rate = RATES.get(self.key)
        self.estimator = TokenEstimator() if rate is None else TokenEstimator(rate, measured=True)
        self.sent = Sent()
        self.over = False
        """The last request fitted is still over the line: clearing was not enough."""
        self.line = 0
        """The last request's line, in tokens."""
        self.before = self.after = 0
        """The last request's estimate before and after clearing."""

    def fit(self, request: ModelRequest, step: int, *, refused: bool = False) -> ContextManaged | None:
        """Clear what ``request`` must lose to fit (its ``messages`` are replaced), and say
        what was done; None when nothing was cleared (it fit, or nothing is left to clear).
        ``refused``: the provider refused it as too long, so it is fitted against half the line."""
        chars, attachments = request_chars(request)
        est = self.estimator
        before = est.tokens(chars, attachments)
        request.max_tokens = min(request.max_tokens, max(MIN_OUTPUT, self.window // 2))
        line = input_budget(self.window, request.max_tokens, self.fraction)
        if refused:
            line //= 2
        self.sent, self.line, self.over = Sent(chars, attachments), line, before > line
        self.before = self.after = before
        if before <= line:
            return None
        messages = request.messages
        last = messages[-1] if messages else None
        unread = last is not None and last.role == "user" and any(isinstance(b, ToolResultBlock) for b in last.blocks)
        excess = int((before - line) * est.chars_per_token) + 1
        request.messages, cleared = clear_tool_results(messages, excess, keep_from=len(messages) - unread,
                                                       chars_per_token=est.chars_per_token)
        if not cleared:
            return None
        chars, attachments = request_chars(request)
        self.sent = Sent(chars, attachments)
        self.after = after = est.tokens(chars, attachments)
        self.over = after > line
        if after + request.max_tokens > self.window:  # could not get under the line: leave the answer what is left
            request.max_tokens = max(MIN_OUTPUT, self.window - after)
        return ContextManaged(step=step, cleared=[c.tool_use_id for c in cleared], tokens_before=before,
                              tokens_after=after, window=self.window, retry=refused)

    def refused(self, exc: ProviderError, origin: str) -> None:
        """The provider refused a request as too long: take the window it states, if it does,
        for this model from now on (``windows.SEEN``)."""
        stated = stated_window(exc)
        if stated is not None and stated < self.window:
            self.window = SEEN[origin] = stated

    def too_long(self, exc: ProviderError, model: str) -> ContextTooLong:
        """The error a turn fails with when the provider refused the request again."""
        return ContextTooLong(
            f"The conversation is too long for {model}'s context window ({self.window:,} tokens), even with "
            f"old tool results cleared ({exc.message}). Start a new chat, or ask for a summary of this one in a "
            f"new chat; set TURNSTREAM_CONTEXT_TOKENS if this model's window is smaller than turnstream assumed.",
            status=exc.status, error_type=exc.error_type, api_code=exc.api_code)

    def measured(self, usage: Usage, provider: str) -> None:
        """The step's usage counted the request last fitted: calibrate the next estimate."""
        if usage.unknown:
            return
        whole = usage.input_tokens
        if provider not in _CACHED_IN_INPUT:
            whole += usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        self.estimator.calibrate(self.sent.chars, self.sent.attachments, whole)
        if self.estimator.measured:
            RATES[self.key] = self.estimator.chars_per_token
            RATES.move_to_end(self.key)
            while len(RATES) > RATES_KEPT:
                RATES.popitem(last=False)
