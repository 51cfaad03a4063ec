"""Clearing old tool results from a request, oldest first, until it fits.

A tool result is usually the biggest thing in a long conversation (a cell's output, a file
read) and the least needed later: the model has already read it and said what it made of
it. So before anything is summarised the oldest results are replaced, in the request only,
by a note that says what was there and how to get it back. Every ``tool_use`` keeps its
``tool_result`` (the pairing every provider checks), assistant messages are not touched (so
thinking blocks and their signatures stay as the model made them), and the results of the
step just run are never cleared: the model has not seen them yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..blocks import ToolResultBlock, ToolUseBlock
from ..providers.base import Message
from .estimate import ATTACHMENT_TOKENS


@dataclass(frozen=True, slots=True)
class Cleared:
    """One tool result whose content was left out of a request."""

    tool_use_id: str
    name: str
    chars: int
    attachments: int


def note(name: str, chars: int) -> str:
    """What the model reads in place of a cleared result."""
    return (f"[cleared to fit the model's context: {chars:,} characters of {name} output; "
            f"run it again to see it]")


def cleared_already(content: str) -> bool:
    return content.startswith("[cleared to fit the model's context:")


def clear_tool_results(messages: Sequence[Message], excess_chars: int, *, keep_from: int,
                       chars_per_token: float) -> tuple[list[Message], list[Cleared]]:
    """Replace the content of the oldest tool results in ``messages[:keep_from]`` with a note
    until at least ``excess_chars`` characters are gone (an attachment counts as its tokens'
    worth of characters), or none is left to clear. Returns the new list (messages that
    changed are copies; the others, and every block, are shared with the input) and what
    was cleared, oldest first."""
    out = list(messages)
    cleared: list[Cleared] = []
    if excess_chars <= 0:
        return out, cleared
    names: dict[str, str] = {}
    freed = 0
    per_attachment = int(ATTACHMENT_TOKENS * chars_per_token)
    for i, m in enumerate(messages[:keep_from]):
        if m.role == "assistant":
            for b in m.blocks:
                if isinstance(b, ToolUseBlock):
                    names[b.tool_use_id] = b.name
            continue
        blocks: list[object] | None = None
        for j, b in enumerate(m.blocks):
            if not isinstance(b, ToolResultBlock) or cleared_already(b.content):
                continue
            name = names.get(b.tool_use_id, "tool")
            text = note(name, len(b.content))
            gain = len(b.content) - len(text) + len(b.attachments) * per_attachment
            if gain <= 0:
                continue
            if blocks is None:
                blocks = list(m.blocks)
            blocks[j] = b.model_copy(update={"content": text, "attachments": []})
            cleared.append(Cleared(b.tool_use_id, name, len(b.content), len(b.attachments)))
            freed += gain
            if freed >= excess_chars:
                break
        if blocks is not None:
            out[i] = Message(m.role, blocks)  # type: ignore[arg-type]
        if freed >= excess_chars:
            break
    return out, cleared
