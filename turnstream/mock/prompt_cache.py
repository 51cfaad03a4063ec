"""The mock provider's prompt cache, as Anthropic's behaves: what a request reads from and
writes to the cache, from its ``cache_control`` breakpoints.

A breakpoint caches the prompt up to and including its block (tools, then system, then
messages). A later request whose prompt starts with a cached prefix reads it
(``cache_read_input_tokens``); the part from there up to its last breakpoint is written
(``cache_creation_input_tokens``). The plain input tokens stay those the scenario scripts,
so tests that count them are not disturbed by caching. A prefix shorter than
``min_tokens`` (1024, Sonnet's minimum) is not cached. Tokens are estimated as one per four
characters of the prefix's JSON, which is enough for tests to see reads grow step by step.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .media_rules import content_of

MIN_TOKENS = 1024


def _pieces(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt as (JSON of one block without its cache_control, has a breakpoint), in order."""
    out: list[tuple[str, bool]] = []

    def add(b: Any) -> None:
        if isinstance(b, dict):
            rest = {k: v for k, v in b.items() if k != "cache_control"}
            out.append((json.dumps(rest, sort_keys=True), "cache_control" in b))
        else:
            out.append((json.dumps(b), False))

    for t in body.get("tools") or []:
        add(t)
    system = body.get("system")
    for b in system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else []):
        add(b)
    for m in body.get("messages") or []:
        out.append((json.dumps(m.get("role")), False))
        for b in content_of(m):
            add(b)
    return out


class PromptCache:
    """Prefixes cached so far, by hash of the model and the prefix."""

    def __init__(self, min_tokens: int = MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._cached: set[str] = set()

    def usage(self, body: dict[str, Any]) -> dict[str, int] | None:
        """``cache_read_input_tokens`` and ``cache_creation_input_tokens`` of a request,
        caching its breakpoints' prefixes; None when it has no breakpoint."""
        pieces = _pieces(body)
        if not any(mark for _, mark in pieces):
            return None
        h = hashlib.sha256(str(body.get("model", "")).encode())
        chars = 0
        read = 0
        last = 0
        new: list[tuple[str, int]] = []
        for text, mark in pieces:
            h.update(text.encode())
            chars += len(text)
            if not mark:
                continue
            tokens = chars // 4
            key = h.hexdigest()
            if key in self._cached:
                read = tokens
            elif tokens >= self.min_tokens:
                new.append((key, tokens))
            last = max(last, tokens)
        written = last - read if new and last > read else 0
        self._cached.update(k for k, _ in new)
        return {"cache_read_input_tokens": read, "cache_creation_input_tokens": written}
