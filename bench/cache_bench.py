"""Prompt caching across the steps of one turn: the input tokens each step of a 3-step turn
reads from the cache and writes to it, through the Anthropic adapter and ``turnstream
mock-provider`` (which places and counts the cache as the API does, ``mock/prompt_cache.py``).

The turn: a system prompt of about 2,000 tokens, two tool calls, then an answer. The first
step writes the whole prefix; each later step reads everything the one before it wrote and
writes only what was added since (the last call and its result). Token counts are the mock's
estimate (four characters a token), so they show the shape, not a real model's numbers.

    python bench/cache_bench.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from persistence_bench import mock_provider  # beside this file: the mock in a subprocess

from turnstream import Agent, tool
from turnstream.events import StepUsage
from turnstream.providers.anthropic import AnthropicProvider

SYSTEM = "You are a careful data analyst who explains every step of the work. " * 110
STEPS: dict[str, Any] = {"name": "cache-bench", "steps": [
    {"blocks": [{"type": "tool_use", "name": "lookup", "input": {"table": "sales", "rows": 200}}]},
    {"blocks": [{"type": "tool_use", "name": "lookup", "input": {"table": "costs", "rows": 200}}]},
    {"blocks": [{"type": "text", "text": "Sales exceed costs in every month."}]}]}


@tool
def lookup(table: str, rows: int) -> str:
    """Read rows of a table."""
    return ",".join(f"{table}{i}" for i in range(rows))


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        async with mock_provider(Path(tmp), STEPS) as base:
            provider = AnthropicProvider("cache-bench", api_key="bench", base_url=base)
            try:
                usages = [ev async for ev in Agent(provider, tools=[lookup], system=SYSTEM).stream("Compare them.")
                          if isinstance(ev, StepUsage)]
            finally:
                await provider.aclose()
    print("| step | input (uncached) | cache read | cache written | read share |")
    print("|---|---|---|---|---|")
    for u in usages:
        x = u.usage
        whole = x.input_tokens + x.cache_read_input_tokens + x.cache_creation_input_tokens
        print(f"| {u.step} | {x.input_tokens:,} | {x.cache_read_input_tokens:,} | {x.cache_creation_input_tokens:,} "
              f"| {x.cache_read_input_tokens / whole:.0%} |")
    ok = len(usages) == 3 and all(u.usage.cache_read_input_tokens > 0 for u in usages[1:])
    if not ok:
        print("the later steps read nothing from the cache", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
