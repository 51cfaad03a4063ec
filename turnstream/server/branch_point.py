"""Where a protocol client's new message goes in the session's tree of turns
(docs/branches.md), read from the conversation it sends along: the AI SDK's ``useChat`` and
AG-UI's ``HttpAgent`` post their whole message list with every request.

The client's earlier user messages are walked down the tree from the first turn: each is
the input of a turn that follows the one reached so far (a version of that message), or a
message that turn took while it was open (steering: queued for a step, or the reason of a
denial), or neither, and there the client's history leaves the server's: an earlier message
was edited, or the client dropped the messages after it. The new message follows the last
turn reached. Of several versions with the same input, the one named by the client's answer
(an AI SDK assistant message's id is its turn's id) is taken, else the one on the branch
shown (``current_leaf``), else the newest.

A client that sends no history (only its new message: ``curl``, a script) is not read as
one that dropped every earlier message: its message follows the current leaf, as before
branches. Nor is a history that leads to the current leaf: that is the ordinary next
message, which may still steer an open turn (docs/steering.md). Only a history that leads
elsewhere starts a branch."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ..blocks import ToolResultBlock, Turn, UserBlock
from ..branches import ROOT, path


@dataclass(frozen=True, slots=True)
class Said:
    """One earlier user message of the client's, as the walk reads it."""

    text: str
    named: Collection[str] = field(default_factory=frozenset)
    """The ids the client gave the answers that follow it (the turn's id, for an AI SDK
    message the server named); ids that are no turn's are never matched."""


def branch_point(turns: Sequence[Turn], leaf: str | None, history: Sequence[Said]) -> str | None:
    """The turn the client's new message follows when that is not the current leaf: a turn
    id, or ``ROOT`` for a new version of the first message; None when it follows the current
    leaf (no history, or a history that leads there)."""
    if not history or leaf is None:
        return None
    reached = follow(turns, leaf, history)
    if reached is not None and reached.id == leaf:
        return None
    return reached.id if reached is not None else ROOT


def follow(turns: Sequence[Turn], leaf: str | None, history: Sequence[Said]) -> Turn | None:
    """The last turn of the tree the client's ``history`` agrees with (None: not even a
    first turn)."""
    shown = {t.id for t in path(turns, leaf)}
    at: Turn | None = None
    for said in history:
        if not said.text:
            continue  # a message of files only starts no turn; it cannot disagree
        parent = at.id if at is not None else None
        versions = [t for t in turns if t.parent_turn_id == parent and _starts(t.input, said.text)]
        named = [t for t in versions if t.id in said.named]
        if named:
            at = named[-1]
        elif at is not None and _took(at, said.text):
            continue
        elif versions:
            at = next((t for t in reversed(versions) if t.id in shown), versions[-1])
        else:
            break
    return at


def _starts(given: str, text: str) -> bool:
    """A turn's input is the message's text, perhaps followed by a paragraph the server
    added (AG-UI's ``context``) or by messages queued with it (docs/steering.md)."""
    return given == text or given.startswith(text + "\n\n")


def _took(turn: Turn, text: str) -> bool:
    """``text`` reached ``turn`` while it was open: queued for a step (a ``user`` block),
    the reason of a denial (in a tool result), or one of several queued messages that
    started it together."""
    if f"\n\n{text}\n\n" in f"\n\n{turn.input}\n\n":
        return True
    return any((isinstance(b, UserBlock) and b.step > 0 and b.text == text)
               or (isinstance(b, ToolResultBlock) and b.is_error and text.strip() in b.content) for b in turn.blocks)


__all__ = ["Said", "branch_point", "follow"]
