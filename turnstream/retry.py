"""The one retry policy (SPEC §2, PROVIDER-FACTS "Retries").

* Before a stream's first event: retry 408, 409, 429, 5xx (529 included) and connection
  errors up to ``max_retries`` times, waiting ``retry-after`` when the provider says so
  (capped), else ``min(base·2ⁿ, cap)`` with full jitter. A 429 that carries no
  ``retry-after`` and speaks of a quota or spend limit cannot succeed and is not retried.
* After the first event, a broken stream is not retried here: the loop restarts the step
  from the same transcript (at most ``stream_restarts`` times) and says so with
  ``step_restart``.
The official SDKs retry too; turnstream talks HTTP itself, so attempts never multiply.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass

from .errors import ProviderError
from .providers.base import ModelRequest, Provider, ProviderEvent

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
RETRYABLE_ERROR_TYPES = frozenset({
    "overloaded_error", "api_error", "rate_limit_error", "timeout_error", "server_error",
    "internal_server_error", "service_unavailable",
})
_QUOTA_WORDS = ("insufficient_quota", "quota", "spend limit", "spending limit", "billing", "credit balance")


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def is_hopeless_429(message: str, error_type: str | None, retry_after: float | None) -> bool:
    """A 429 for a spend limit or exhausted quota: no retry can succeed."""
    if retry_after is not None:
        return False
    text = f"{error_type or ''} {message}".lower()
    return any(w in text for w in _QUOTA_WORDS)


def parse_retry_after(headers: dict[str, str] | object) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (numbers only), or None."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    s = get("retry-after")
    if s:
        try:
            return max(0.0, float(s))
        except ValueError:
            return None
    return None


@dataclass(slots=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return random.uniform(0, min(self.base_delay * 2 ** attempt, self.max_delay))


Sleep = Callable[[float], Awaitable[None]]


async def stream_with_retries(
    provider: Provider, request: ModelRequest, policy: RetryPolicy, *, sleep: Sleep = asyncio.sleep,
    on_retry: Callable[[int, ProviderError, float], None] | None = None,
) -> AsyncGenerator[ProviderEvent, None]:
    """Yield the step's events, retrying failures that happen before the first event."""
    attempt = 0
    while True:
        started = False
        try:
            async with aclosing(provider.stream(request)) as events:
                async for ev in events:
                    started = True
                    yield ev
            return
        except ProviderError as exc:
            if started or not exc.retryable or attempt >= policy.max_retries:
                raise
            wait = policy.delay(attempt, exc.retry_after)
            if on_retry is not None:
                on_retry(attempt + 1, exc, wait)
            attempt += 1
            await sleep(wait)
