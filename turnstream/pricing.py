"""What a step costs: a price table per ``provider:model``, in integer nano-dollars per token.

Integers, not floats: a day of a busy user sums many thousands of steps, and a float sum
drifts. One nano-dollar per token is $0.001 per million tokens, finer than any list price,
so every published price is a whole number here ($3 per million tokens = 3000).

Each entry names where its numbers come from and when they were read. A settings file
(``TURNSTREAM_PRICES``, JSON) adds or replaces entries, in US dollars per million tokens
as the providers publish them; ``load_prices`` reads it (docs/budgets.md shows the form).

Token counting differs between the APIs: Anthropic's ``input_tokens`` leaves out the
tokens read from or written to the cache, which it reports apart; OpenAI's input count
includes its cached part. ``cost`` and ``tokens`` know which is which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import orjson

from .blocks import Usage
from .errors import UsageError

ANTHROPIC_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing (read 2026-11-24)"
OPENAI_SOURCE = "https://developers.openai.com/api/docs/pricing (read 2026-11-24)"


@dataclass(frozen=True, slots=True)
class Price:
    """Nano-dollars per token of each kind, and where the numbers come from."""

    input: int
    output: int
    cache_read: int
    cache_write: int
    source: str


def _mtok(usd: str | float | int) -> int:
    """US dollars per million tokens as nano-dollars per token (exact, or ``ValueError``)."""
    try:
        nano = Decimal(str(usd)) * 1000
    except InvalidOperation:
        raise ValueError(f"not a price: {usd!r}") from None
    if nano < 0 or nano != nano.to_integral_value():
        raise ValueError(f"{usd!r} dollars per million tokens is not a whole number of nano-dollars per token")
    return int(nano)


def _p(input: str, output: str, cache_read: str, cache_write: str, source: str) -> Price:
    return Price(_mtok(input), _mtok(output), _mtok(cache_read), _mtok(cache_write), source)


PRICES: dict[str, Price] = {
    # Anthropic: 5-minute cache writes are 1.25x the input price, cache reads 0.1x.
    "anthropic:claude-opus-4-5": _p("5", "25", "0.50", "6.25", ANTHROPIC_SOURCE),
    "anthropic:claude-opus-4-1": _p("15", "75", "1.50", "18.75", ANTHROPIC_SOURCE),
    "anthropic:claude-sonnet-4-5": _p("3", "15", "0.30", "3.75", ANTHROPIC_SOURCE),
    "anthropic:claude-sonnet-4": _p("3", "15", "0.30", "3.75", ANTHROPIC_SOURCE),
    "anthropic:claude-haiku-4-5": _p("1", "5", "0.10", "1.25", ANTHROPIC_SOURCE),
    "anthropic:claude-3-5-haiku": _p("0.80", "4", "0.08", "1", ANTHROPIC_SOURCE),
    # OpenAI: no charge for cache writes; cached input at the listed cached price.
    "openai:gpt-5": _p("1.25", "10", "0.125", "0", OPENAI_SOURCE),
    "openai:gpt-5-mini": _p("0.25", "2", "0.025", "0", OPENAI_SOURCE),
    "openai:gpt-4.1": _p("2", "8", "0.50", "0", OPENAI_SOURCE),
    "openai:gpt-4.1-mini": _p("0.40", "1.60", "0.10", "0", OPENAI_SOURCE),
    "openai:gpt-4o": _p("2.50", "10", "1.25", "0", OPENAI_SOURCE),
    "openai:gpt-4o-mini": _p("0.15", "0.60", "0.075", "0", OPENAI_SOURCE),
}
"""The built-in table. A model id with a date or version suffix (``claude-sonnet-4-5-20250929``)
takes the entry of its longest listed prefix."""

_INPUT_INCLUDES_CACHE = ("openai", "openai-responses")
"""Providers whose input count includes the cached tokens."""


def _family(provider: str) -> str:
    return "openai" if provider in _INPUT_INCLUDES_CACHE else provider


def price_of(origin: str, prices: Mapping[str, Price] = PRICES) -> Price | None:
    """The price of ``provider:model``, by exact name or longest listed prefix; None if unknown."""
    provider, _, model = origin.partition(":")
    key = f"{_family(provider)}:{model}"
    found = prices.get(key)
    if found is not None:
        return found
    best = max((k for k in prices if key.startswith(k + "-")), key=len, default=None)
    return prices[best] if best is not None else None


def tokens(usage: Usage, provider: str) -> int:
    """Every token a step processed: its whole input (cached or not) and its output."""
    cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    whole_input = usage.input_tokens if provider in _INPUT_INCLUDES_CACHE else usage.input_tokens + cached
    return whole_input + usage.output_tokens


def cost(usage: Usage, provider: str, price: Price | None) -> int:
    """What a step cost in nano-dollars (0 when its model has no price)."""
    if price is None:
        return 0
    read, write = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
    plain = usage.input_tokens - read - write if provider in _INPUT_INCLUDES_CACHE else usage.input_tokens
    return (max(plain, 0) * price.input + read * price.cache_read + write * price.cache_write
            + usage.output_tokens * price.output)


def load_prices(path: Path) -> dict[str, Price]:
    """The built-in table with the entries of a JSON file added or replaced. The file maps
    ``provider:model`` to ``input``, ``output``, ``cache_read`` and ``cache_write`` in US
    dollars per million tokens (numbers or strings; ``cache_*`` default to 0) and an
    optional ``source``. ``UsageError`` naming the entry for anything else."""
    try:
        raw: Any = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"the price file {path} cannot be read: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"the price file {path} must hold an object of provider:model entries")
    table = dict(PRICES)
    for origin, entry in raw.items():
        if ":" not in origin or not isinstance(entry, dict):
            raise UsageError(f"{path}: {origin!r} must be provider:model with an object of prices")
        try:
            table[origin] = Price(_mtok(entry["input"]), _mtok(entry["output"]), _mtok(entry.get("cache_read", 0)),
                                  _mtok(entry.get("cache_write", 0)), str(entry.get("source", str(path))))
        except KeyError as exc:
            raise UsageError(f"{path}: {origin!r} has no {exc.args[0]} price") from None
        except ValueError as exc:
            raise UsageError(f"{path}: {origin!r}: {exc}") from None
    return table


def dollars(nano: int) -> str:
    """Nano-dollars as a short dollar amount for people: ``$0.0123``."""
    return f"${Decimal(nano) / 1_000_000_000:.4f}"


__all__ = ["PRICES", "Price", "cost", "dollars", "load_prices", "price_of", "tokens"]
