"""Turns form a tree (docs/branches.md), on every store: each turn names its parent, the
session its current leaf; a database from before the tree (migration 0009) becomes one
branch per session."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.store_backends import Backend
from turnstream import branches
from turnstream.blocks import Turn, Usage
from turnstream.errors import InvalidValue, NotFound
from turnstream.store import Store, TurnConflictError, schema


async def turn(store: Store, session_id: str, text: str, parent: str | None = None) -> Turn:
    """A turn that ran to its end (so that the next one may start)."""
    t = await store.create_turn(session_id, text, model="scripted:x", parent_turn_id=parent)
    await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=1)
    return t


async def leaf(store: Store, session_id: str) -> str | None:
    s = await store.get_session(session_id)
    assert s is not None
    return s.current_leaf


async def test_a_turn_follows_the_current_leaf_or_the_parent_it_is_given(store: Store) -> None:
    s = await store.create_session("usr_1")
    assert s.current_leaf is None
    a = await turn(store, s.id, "a")
    b = await turn(store, s.id, "b")
    assert (a.parent_turn_id, b.parent_turn_id) == (None, a.id)
    assert await leaf(store, s.id) == b.id
    b2 = await turn(store, s.id, "b edited", parent=a.id)  # an edit of b: its sibling
    assert b2.parent_turn_id == a.id
    assert await leaf(store, s.id) == b2.id
    c2 = await turn(store, s.id, "c")  # after the current leaf, b2
    assert c2.parent_turn_id == b2.id
    listed = await store.list_turns(s.id)
    assert [(t.id, t.parent_turn_id) for t in listed] == [(a.id, None), (b.id, a.id), (b2.id, a.id),
                                                          (c2.id, b2.id)]
    assert [t.id for t in branches.path(listed, c2.id)] == [a.id, b2.id, c2.id]
    assert [t.id for t in branches.path(listed, b.id)] == [a.id, b.id]
    assert [t.id for t in branches.siblings(listed, b2.id)] == [b.id, b2.id]
    assert [t.id for t in branches.siblings(listed, a.id)] == [a.id]
    got = await store.get_turn(b2.id)
    assert got is not None and got.parent_turn_id == a.id
    with_turns = await store.get_session(s.id, with_turns=True)
    assert with_turns is not None and [t.parent_turn_id for t in with_turns.turns] == [None, a.id, a.id, b2.id]


async def test_the_current_leaf_moves_to_a_turn_of_the_session_only(store: Store) -> None:
    s = await store.create_session("usr_1")
    other = await store.create_session("usr_1")
    a = await turn(store, s.id, "a")
    b = await turn(store, s.id, "b")
    elsewhere = await turn(store, other.id, "x")
    await store.set_current_leaf(s.id, a.id)
    assert await leaf(store, s.id) == a.id
    c = await turn(store, s.id, "c")  # follows the leaf that was switched to
    assert c.parent_turn_id == a.id
    with pytest.raises(InvalidValue) as refused:
        await store.set_current_leaf(s.id, elsewhere.id)
    assert refused.value.field == "turn_id"
    with pytest.raises(InvalidValue):
        await store.set_current_leaf(s.id, "turn_missing")
    with pytest.raises(NotFound):
        await store.set_current_leaf("ses_missing", b.id)
    assert await leaf(store, s.id) == c.id
    assert await leaf(store, other.id) == elsewhere.id


async def test_a_parent_from_another_session_is_refused_and_nothing_is_stored(store: Store) -> None:
    s = await store.create_session("usr_1")
    other = await store.create_session("usr_1")
    a = await turn(store, s.id, "a")
    elsewhere = await turn(store, other.id, "x")
    for parent in (elsewhere.id, "turn_missing"):
        with pytest.raises(InvalidValue) as refused:
            await store.create_turn(s.id, "b", model="scripted:x", parent_turn_id=parent)
        assert refused.value.field == "parent_turn_id"
    with pytest.raises(NotFound):
        await store.create_turn("ses_missing", "b", model="scripted:x", parent_turn_id=a.id)
    assert [t.id for t in await store.list_turns(s.id)] == [a.id]
    assert await leaf(store, s.id) == a.id


async def test_a_turn_open_on_another_branch_still_blocks_a_new_one(store: Store) -> None:
    s = await store.create_session("usr_1")
    a = await turn(store, s.id, "a")
    open_one = await store.create_turn(s.id, "b", model="scripted:x")
    with pytest.raises(TurnConflictError) as refused:
        await store.create_turn(s.id, "b again", model="scripted:x", parent_turn_id=a.id)
    assert refused.value.turn_id == open_one.id
    assert await leaf(store, s.id) == open_one.id


def _run_sql(db: Path, statements: list[str]) -> None:
    conn = sqlite3.connect(db)
    try:
        with conn:
            for sql in statements:
                conn.execute(sql)
    finally:
        conn.close()


@pytest.mark.durable
async def test_a_database_from_before_the_tree_becomes_one_branch_per_session(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    every = schema.migrations
    with monkeypatch.context() as m:  # a database as turnstream made it before migration 0009
        m.setattr(schema, "migrations", lambda dialect: [mig for mig in every(dialect) if mig.version < 9])
        async with backend.opened():
            pass
    rows = [("ses_a", "turn_a1"), ("ses_b", "turn_b1"), ("ses_a", "turn_a2"), ("ses_b", "turn_b2"),
            ("ses_a", "turn_a3")]
    statements = [f"INSERT INTO sessions (id, user_id, created_at) VALUES ('{s}', 'usr_1', 1)"
                  for s in ("ses_a", "ses_b", "ses_empty")]
    statements += [f"INSERT INTO turns (id, session_id, input, status, created_at) VALUES ('{t}', '{s}', 'hi',"
                   f" 'complete', {i})" for i, (s, t) in enumerate(rows)]
    if backend.name == "sqlite":
        _run_sql(tmp_path / "turnstream.db", statements)
    else:
        assert backend.sql is not None
        for sql in statements:
            await backend.sql(sql)
    async with backend.opened() as store:
        parents = {t.id: t.parent_turn_id for s in ("ses_a", "ses_b") for t in await store.list_turns(s)}
        assert parents == {"turn_a1": None, "turn_a2": "turn_a1", "turn_a3": "turn_a2",
                           "turn_b1": None, "turn_b2": "turn_b1"}
        assert [await leaf(store, s) for s in ("ses_a", "ses_b", "ses_empty")] == ["turn_a3", "turn_b2", None]
        after = await turn(store, "ses_a", "next")
        assert after.parent_turn_id == "turn_a3"


async def test_a_new_first_turn_follows_no_turn(store: Store) -> None:
    s = await store.create_session("usr_1")
    a = await turn(store, s.id, "a")
    await turn(store, s.id, "b")
    a2 = await turn(store, s.id, "a edited", parent=branches.ROOT)
    assert a2.parent_turn_id is None
    assert await leaf(store, s.id) == a2.id
    listed = await store.list_turns(s.id)
    assert [t.id for t in branches.siblings(listed, a.id)] == [a.id, a2.id]
    assert [t.id for t in branches.path(listed, a2.id)] == [a2.id]
