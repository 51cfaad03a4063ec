"""Turns form a tree (docs/branches.md): each turn names the turn it follows
(``Turn.parent_turn_id``), so an edited message or a regenerated answer is a sibling of the
turn it replaces, and every version is kept. What a turn reads of its session is one path of
that tree, from the first turn to its parent, never a sibling branch.

Pure functions over a session's turns (``Store.list_turns``, in creation order)."""

from __future__ import annotations

from collections.abc import Sequence

from .blocks import Turn

ROOT = ""
"""The ``parent_turn_id`` of a turn that follows no turn: a new version of the session's first
message (None means "after the current leaf")."""


def path(turns: Sequence[Turn], leaf_id: str | None) -> list[Turn]:
    """The turns from the session's first turn down to ``leaf_id`` (included), by parent
    links; empty for None. A leaf that is not among ``turns`` gives an empty path."""
    by_id = {t.id: t for t in turns}
    out: list[Turn] = []
    at = by_id.get(leaf_id) if leaf_id is not None else None
    while at is not None and len(out) < len(by_id):  # the bound stops a (corrupt) circle of links
        out.append(at)
        at = by_id.get(at.parent_turn_id) if at.parent_turn_id is not None else None
    out.reverse()
    return out


def siblings(turns: Sequence[Turn], turn_id: str) -> list[Turn]:
    """The turns that follow the same turn as ``turn_id`` (its versions), in creation order,
    itself included; empty when it is not among ``turns``."""
    me = next((t for t in turns if t.id == turn_id), None)
    if me is None:
        return []
    return [t for t in turns if t.parent_turn_id == me.parent_turn_id]
