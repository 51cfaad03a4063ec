"""Compaction: the conversation's first turns summarised by the model, when clearing old tool
results cannot bring a request under the line (docs/context.md).

The summary is one model call to the turn's own model, on a plain request (no tools, one user
message holding the covered turns as text), so no pairing or thinking rule applies to it.
What it is given: the previous summary, if there is one, and the turns after it up to the
last ``KEEP_TURNS`` (tool calls and the first ``RESULT_CHARS`` characters of each result; a
model reading the summary can run a tool again), cut from the front to what the window
holds. It is stored as a ``CompactionBlock`` of the turn that asked for it, and
``transcript.build`` sends it in place of the turns it covers from then on.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing

from ..blocks import Block, CompactionBlock, TextBlock, ToolResultBlock, ToolUseBlock, Usage, UserBlock
from ..providers.base import Delta, Message, ModelRequest, Provider, StepEnded
from ..retry import RetryPolicy, stream_with_retries

KEEP_TURNS = (2, 1, 0)
"""How many of the latest earlier turns a summary leaves as they are, the most it can."""
RESULT_CHARS = 300
"""The first characters of each tool result the summary is written from."""
SUMMARY_SYSTEM = ("You condense conversations. The summary you write replaces the earlier part of a "
                  "conversation between a user and an assistant that uses tools, so that it can go on.")
SUMMARY_PROMPT = ("Summarise the conversation below so that the assistant can continue it without it: "
                  "what the user asked for and decided, what was done and found (names, numbers, file and "
                  "cell names, results), what is still open. Plain prose and short lists; no preamble.")


def plan(turns: int, covered: int) -> int | None:
    """How many of the ``turns`` earlier turns a new summary should stand for, given that the
    newest summary stands for ``covered``; None when it would stand for no more."""
    for keep in KEEP_TURNS:
        covers = turns - keep
        if covers > covered:
            return covers
    return None


def conversation_text(turns: Sequence[tuple[str, Sequence[Block]]], previous: CompactionBlock | None,
                      limit_chars: int) -> str:
    """The turns as plain text for the summary request, after ``previous``'s summary, cut
    from the front (the oldest part, which the previous summary already holds) to
    ``limit_chars``."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for user_input, blocks in turns:
        if user_input:
            lines.append(f"User: {user_input}")
        for b in sorted(blocks, key=lambda b: b.seq):
            if isinstance(b, TextBlock) and b.text:
                lines.append(f"Assistant: {b.text}")
            elif isinstance(b, ToolUseBlock):
                names[b.tool_use_id] = b.name
                args = b.raw_input if b.raw_input is not None else str(b.input)
                lines.append(f"Assistant called {b.name}({args[:RESULT_CHARS]})")
            elif isinstance(b, ToolResultBlock):
                cut = b.content[:RESULT_CHARS] + ("…" if len(b.content) > RESULT_CHARS else "")
                lines.append(f"{names.get(b.tool_use_id, 'tool')} returned{' an error' if b.is_error else ''}: {cut}")
            elif isinstance(b, UserBlock) and b.text:
                lines.append(f"User (while the assistant worked): {b.text}")
    text = "\n".join(lines)
    head = f"Summary of what came before:\n{previous.summary}\n\nThen:\n" if previous is not None else ""
    room = max(0, limit_chars - len(head) - 3)
    if len(text) > room:
        text = "[…]" + text[len(text) - room:]
    return head + text


async def summarise(provider: Provider, text: str, *, max_tokens: int, retry: RetryPolicy) -> tuple[str, Usage]:
    """The model's summary of ``text`` and the call's usage (``ProviderError`` when it fails)."""
    request = ModelRequest(model=provider.model, messages=[Message("user", [f"{SUMMARY_PROMPT}\n\n{text}"])],
                           system=SUMMARY_SYSTEM, tools=[], tool_choice="none", max_tokens=max_tokens)
    parts: list[str] = []
    usage = Usage()
    async with aclosing(stream_with_retries(provider, request, retry)) as events:
        async for ev in events:
            if isinstance(ev, Delta) and ev.kind == "text" and isinstance(ev.value, str):
                parts.append(ev.value)
            elif isinstance(ev, StepEnded):
                usage = ev.usage
    return "".join(parts).strip(), usage
