"""Limits for tests that exercise retries: the same policy, with delays of a millisecond."""

from __future__ import annotations

from typing import Any

from turnstream.limits import Limits
from turnstream.retry import RetryPolicy


def fast_limits(**kw: Any) -> Limits:
    return Limits(retry=RetryPolicy(base_delay=0.001, max_delay=0.01), **kw)
