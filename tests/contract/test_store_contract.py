"""What correct storage means: one suite, run against every Store backend.

Every test takes the ``store`` (an opened store) and, where it needs a second process on the
same database, ``backend.opened()`` (not run for the memory store, which no other process
can see). Concurrency is real: PostgreSQL peers use their own connections, and nothing
waits on a clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.store_backends import Backend
from turnstream.blocks import (
    BLOCK_ADAPTER,
    Attachment,
    Block,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    Usage,
    UserBlock,
)
from turnstream.errors import AlreadyExists, FileTooLarge, NotFound, StaleNotebook, TurnTakenOver, UserExists
from turnstream.store import SeqConflictError, Store, StoredEvent, TurnConflictError
from turnstream.store.keys import hash_key
from turnstream.store.postgres import PostgresStore
from turnstream.store.protocol import Spend, ToolCallStart, ToolDecision


def ev(turn_id: str, n: int, name: str = "step_start", /, **data: Any) -> StoredEvent:
    return StoredEvent(turn_id=turn_id, n=n, name=name, data=data)


def stop(turn_id: str, n: int, block: Block) -> StoredEvent:
    """The block_stop event that travels with a block, as the runner makes it."""
    return StoredEvent(turn_id, n, "block_stop",
                       {"index": block.seq, "block": BLOCK_ADAPTER.dump_python(block, mode="json")})


async def new_turn(store: Store, user: str = "usr_1", **kw: Any) -> Turn:
    session = await store.create_session(user)
    return await store.create_turn(session.id, "hello", model="scripted:x", **kw)


def text(seq: int, step: int = 1, body: str = "hi") -> TextBlock:
    return TextBlock(seq=seq, step=step, text=body)


# users ---------------------------------------------------------------------
async def test_user_found_by_key_and_only_its_hash_is_stored(store: Store, backend: Backend) -> None:
    user, key = await store.create_user("ada")
    assert user.name == "ada"
    assert await store.user_by_key(key) == user
    assert await store.user_by_key(key + "x") is None
    assert await store.user_by_key("") is None
    other, other_key = await store.create_user("bob")
    assert other_key != key and other.id != user.id
    assert await store.user_by_key(other_key) == other
    assert backend.raw is not None
    everything = await backend.raw()
    assert key not in everything and other_key not in everything
    assert hash_key(key) in everything


async def test_a_user_name_is_taken_once(store: Store) -> None:
    user, key = await store.create_user("ada")
    with pytest.raises(UserExists, match="'ada'") as refused:
        await store.create_user("ada")
    assert isinstance(refused.value, AlreadyExists) and refused.value.name == "ada"
    assert await store.user_by_key(key) == user  # the first one is untouched
    other, _ = await store.create_user("Ada")  # names are compared exactly
    assert other.id != user.id


@pytest.mark.durable
async def test_two_stores_creating_one_name_make_one_user(backend: Backend) -> None:
    async with backend.opened() as a, backend.opened() as b:
        outcomes = await asyncio.gather(a.create_user("grace"), b.create_user("grace"), return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == ["UserExists", "tuple"]


# sessions ------------------------------------------------------------------
async def test_sessions_are_listed_per_user_in_creation_order(store: Store) -> None:
    a = await store.create_session("usr_a", title="first", model="m1", toolset="notebook")
    b = await store.create_session("usr_a", session_id="ses_chosen")
    await store.create_session("usr_b")
    assert [s.id for s in await store.list_sessions("usr_a")] == [a.id, "ses_chosen"]
    assert await store.list_sessions("usr_nobody") == []
    got = await store.get_session(a.id)
    assert got is not None
    assert (got.user_id, got.title, got.model, got.toolset) == ("usr_a", "first", "m1", "notebook")
    assert got.turns == []
    assert got.created_at == pytest.approx(a.created_at)
    assert b.id == "ses_chosen"
    with pytest.raises(ValueError):
        await store.create_session("usr_a", session_id="ses_chosen")
    assert await store.get_session("ses_missing") is None


async def test_a_session_is_renamed(store: Store) -> None:
    s = await store.create_session("usr_a")
    assert s.title == ""
    assert await store.rename_session(s.id, "Sales by region") is True
    got = await store.get_session(s.id)
    assert got is not None and got.title == "Sales by region"
    assert [x.title for x in await store.list_sessions("usr_a")] == ["Sales by region"]
    assert await store.rename_session("ses_missing", "x") is False


async def test_a_session_keeps_its_agents_and_current_agent(store: Store) -> None:
    agents = [{"name": "a", "model": "anthropic:m", "handoffs": ["b"]}, {"name": "b", "model": "openai:m"}]
    s = await store.create_session("usr_1", agents=agents, current_agent="a")
    plain = await store.create_session("usr_1")
    got = await store.get_session(s.id)
    assert got is not None and got.agents == agents and got.current_agent == "a"
    assert await store.set_current_agent(s.id, "b")
    assert not await store.set_current_agent("ses_missing", "b")
    listed = {x.id: x for x in await store.list_sessions("usr_1")}
    assert listed[s.id].current_agent == "b" and listed[s.id].agents == agents
    assert listed[plain.id].agents is None and listed[plain.id].current_agent is None


async def test_deleting_a_session_deletes_everything_in_it(store: Store) -> None:
    t = await new_turn(store)
    await store.append_block(t.id, text(0), stop(t.id, 1, text(0)))
    await store.save_notebook(t.session_id, {"cells": []})
    assert await store.delete_session(t.session_id) is True
    assert await store.delete_session(t.session_id) is False
    assert await store.get_session(t.session_id) is None
    assert await store.get_turn(t.id) is None
    assert await store.list_turns(t.session_id) == []
    assert await store.events_after(t.id, 0) == []
    assert await store.last_event_n(t.id) == 0
    assert await store.load_notebook(t.session_id) is None


# turns ---------------------------------------------------------------------
async def test_a_turn_keeps_its_blocks_events_and_outcome(store: Store) -> None:
    tools = [{"name": "pick_color", "input_schema": {"type": "object"}}]
    t = await new_turn(store, client_tools=tools)
    assert (t.status, t.input, t.model, t.blocks, t.steps) == ("running", "hello", "scripted:x", [], 0)
    assert await store.client_tools(t.id) == tools
    assert await store.client_tools("turn_missing") == []

    blocks: list[Block] = [
        ThinkingBlock(seq=0, step=1, thinking="hmm", signature="sig"),
        ToolUseBlock(seq=1, step=1, tool_use_id="tu_1", name="pick_color", input={"a": [1, 2]},
                     raw_input='{"a":[1,2]}'),
        ToolResultBlock(seq=2, step=1, tool_use_id="tu_1", content="red"),
        text(3, step=2, body="It is red."),
    ]
    await store.append_event(ev(t.id, 1, "turn_start", turn_id=t.id, session_id=t.session_id))
    for i, block in enumerate(blocks):
        await store.append_block(t.id, block, stop(t.id, 3 + 2 * i, block),
                                 status="awaiting_client" if i == 1 else None)
        if i == 1:
            assert (await store.get_turn(t.id) or t).status == "awaiting_client"
            assert await store.claim_turn(t.id, "awaiting_client", "running")
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_input_tokens=2)
    await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=usage, steps=2,
                            event=ev(t.id, 12, "turn_complete", status="complete"))

    got = await store.get_turn(t.id)
    assert got is not None
    assert got.blocks == blocks
    assert (got.status, got.stop_reason, got.steps, got.error) == ("complete", "end_turn", 2, None)
    assert got.usage == usage
    assert got.text == "It is red."
    assert [e.n for e in await store.events_after(t.id, 0)] == [1, 3, 5, 7, 9, 12]
    assert [e.name for e in await store.events_after(t.id, 9)] == ["turn_complete"]
    assert await store.last_event_n(t.id) == 12
    assert await store.list_turns(t.session_id) == [got]
    session = await store.get_session(t.session_id, with_turns=True)
    assert session is not None and session.turns == [got]


async def test_turns_are_listed_oldest_first_and_failures_keep_their_error(store: Store) -> None:
    first = await new_turn(store)
    await store.finish_turn(first.id, status="failed", stop_reason="error", usage=Usage(), steps=1,
                            error="ProviderStatusError: 500")
    second = await store.create_turn(first.session_id, "again", model="m")
    turns = await store.list_turns(first.session_id)
    assert [t.id for t in turns] == [first.id, second.id]
    assert (turns[0].status, turns[0].error) == ("failed", "ProviderStatusError: 500")


async def test_unknown_ids_raise_key_error_on_writes(store: Store) -> None:
    with pytest.raises(KeyError):
        await store.create_turn("ses_missing", "hi", model="m")
    with pytest.raises(KeyError):
        await store.append_block("turn_missing", text(0), stop("turn_missing", 1, text(0)))
    with pytest.raises(KeyError):
        await store.append_event(ev("turn_missing", 1))
    with pytest.raises(KeyError):
        await store.set_status("turn_missing", "complete")
    with pytest.raises(KeyError):
        await store.discard_step("turn_missing", 1)
    with pytest.raises(KeyError):
        await store.finish_turn("turn_missing", status="complete", stop_reason=None, usage=Usage(), steps=0)
    with pytest.raises(KeyError):
        await store.save_notebook("ses_missing", {})
    assert await store.get_turn("turn_missing") is None
    assert await store.claim_turn("turn_missing", "awaiting_client", "running") is False


# one open turn per session -------------------------------------------------
async def test_a_session_has_at_most_one_open_turn(store: Store) -> None:
    t = await new_turn(store)
    with pytest.raises(TurnConflictError) as info:
        await store.create_turn(t.session_id, "second", model="m")
    assert info.value.turn_id == t.id
    await store.set_status(t.id, "awaiting_client")
    with pytest.raises(TurnConflictError):
        await store.create_turn(t.session_id, "second", model="m")
    await store.finish_turn(t.id, status="cancelled", stop_reason="cancelled", usage=Usage(), steps=1)
    t2 = await store.create_turn(t.session_id, "second", model="m")
    # No status change may reopen an old turn beside the open one.
    with pytest.raises(TurnConflictError) as info:
        await store.set_status(t.id, "running")
    assert info.value.turn_id == t2.id
    with pytest.raises(TurnConflictError):
        await store.claim_turn(t.id, "cancelled", "awaiting_client")
    with pytest.raises(TurnConflictError):
        await store.append_event(ev(t.id, 1), status="running")
    assert (await store.get_turn(t.id) or t2).status == "cancelled"
    assert await store.events_after(t.id, 0) == []
    # Other sessions are not affected.
    await new_turn(store)


async def test_concurrent_create_turn_in_one_session_lets_one_win(store: Store, backend: Backend) -> None:
    async with backend.opened() as peer:
        rival = peer if backend.shared else store
        for _ in range(10):
            session = await store.create_session("usr_1")
            results = await asyncio.gather(
                store.create_turn(session.id, "a", model="m"), rival.create_turn(session.id, "b", model="m"),
                return_exceptions=True)
            winners = [r for r in results if isinstance(r, Turn)]
            losers = [r for r in results if isinstance(r, TurnConflictError)]
            assert len(winners) == 1 and len(losers) == 1, results
            assert losers[0].turn_id == winners[0].id
            assert [t.id for t in await store.list_turns(session.id)] == [winners[0].id]


# seq and n -----------------------------------------------------------------
async def test_block_seq_is_gapless_and_a_refused_block_leaves_nothing(store: Store) -> None:
    t = await new_turn(store)
    for bad_seq in (1, -1):
        with pytest.raises(SeqConflictError):
            await store.append_block(t.id, text(bad_seq), stop(t.id, 1, text(bad_seq)))
    await store.append_block(t.id, text(0), stop(t.id, 1, text(0)))
    for bad_seq in (0, 2):
        with pytest.raises(SeqConflictError):
            await store.append_block(t.id, text(bad_seq), stop(t.id, 5, text(bad_seq)), status="complete")
    got = await store.get_turn(t.id)
    assert got is not None
    assert [b.seq for b in got.blocks] == [0] and got.status == "running"
    assert [e.n for e in await store.events_after(t.id, 0)] == [1]
    assert await store.last_event_n(t.id) == 1


async def test_block_and_event_are_written_together_or_not_at_all(store: Store) -> None:
    t = await new_turn(store)
    await store.append_event(ev(t.id, 4))
    # The block is fine but its event number is stale: neither may be stored.
    for stale in (4, 2):
        with pytest.raises(SeqConflictError):
            await store.append_block(t.id, text(0), stop(t.id, stale, text(0)), status="awaiting_client")
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == [] and got.status == "running"
    assert [e.n for e in await store.events_after(t.id, 0)] == [4]
    # A status change rides in the same write.
    await store.append_block(t.id, text(0), stop(t.id, 5, text(0)), status="awaiting_client")
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == [text(0)] and got.status == "awaiting_client"
    assert [(e.n, e.name) for e in await store.events_after(t.id, 4)] == [(5, "block_stop")]


async def test_event_numbers_rise_and_may_skip(store: Store) -> None:
    t = await new_turn(store)
    assert await store.last_event_n(t.id) == 0
    with pytest.raises(SeqConflictError):
        await store.append_event(ev(t.id, 0))
    await store.append_event(ev(t.id, 1, "turn_start"))
    await store.append_event(ev(t.id, 7, step=1, max_steps=10))
    for bad in (7, 3):
        with pytest.raises(SeqConflictError):
            await store.append_event(ev(t.id, bad), status="complete")
    events = await store.events_after(t.id, 0)
    assert events == [ev(t.id, 1, "turn_start"), ev(t.id, 7, step=1, max_steps=10)]
    assert await store.events_after(t.id, 1) == events[1:]
    assert await store.events_after(t.id, 7) == []
    assert await store.last_event_n(t.id) == 7
    assert (await store.get_turn(t.id) or t).status == "running"
    assert await store.events_after("turn_missing", 0) == []
    assert await store.last_event_n("turn_missing") == 0


async def test_finish_turn_with_a_stale_event_changes_nothing(store: Store) -> None:
    t = await new_turn(store)
    await store.append_event(ev(t.id, 3))
    with pytest.raises(SeqConflictError):
        await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(output_tokens=1),
                                steps=1, event=ev(t.id, 3, "turn_complete"))
    got = await store.get_turn(t.id)
    assert got is not None
    assert (got.status, got.stop_reason, got.usage, got.steps) == ("running", None, Usage(), 0)


async def test_a_turn_can_be_created_with_its_first_event(store: Store) -> None:
    session = await store.create_session("usr_1")
    called: list[str] = []

    def turn_start(turn_id: str) -> StoredEvent:
        called.append(turn_id)
        return ev(turn_id, 1, "turn_start", turn_id=turn_id, session_id=session.id)

    t = await store.create_turn(session.id, "hello", model="m", first_event=turn_start)
    assert called == [t.id]
    assert await store.events_after(t.id, 0) == [turn_start(t.id)]
    assert await store.last_event_n(t.id) == 1
    with pytest.raises(SeqConflictError):
        await store.append_event(ev(t.id, 1))
    await store.append_block(t.id, text(0), stop(t.id, 2, text(0)))
    assert [e.n for e in await store.events_after(t.id, 0)] == [1, 2]
    # Refused with the turn: an open turn in the session, an unknown session, a bad event.
    with pytest.raises(TurnConflictError):
        await store.create_turn(session.id, "again", model="m", first_event=turn_start)
    with pytest.raises(KeyError):
        await store.create_turn("ses_missing", "hi", model="m", first_event=turn_start)
    await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=1)
    with pytest.raises(ValueError):
        await store.create_turn(session.id, "again", model="m", first_event=lambda _: ev("turn_other", 1))
    with pytest.raises(SeqConflictError):
        await store.create_turn(session.id, "again", model="m", first_event=lambda tid: ev(tid, 0))
    assert [x.id for x in await store.list_turns(session.id)] == [t.id]
    # A first event need not be numbered 1: the turn's numbers continue above it.
    t2 = await store.create_turn(session.id, "again", model="m", first_event=lambda tid: ev(tid, 3, "turn_start"))
    assert await store.last_event_n(t2.id) == 3
    with pytest.raises(SeqConflictError):
        await store.append_event(ev(t2.id, 2))


async def test_pending_events_are_stored_with_the_next_write_in_order(store: Store) -> None:
    t = await new_turn(store, first_event=lambda tid: ev(tid, 1, "turn_start"))
    step1 = ev(t.id, 2, step=1, max_steps=10)
    await store.append_block(t.id, text(0), stop(t.id, 4, text(0)), pending=[step1])
    step2, restart = ev(t.id, 5, step=2, max_steps=10), ev(t.id, 7, "step_restart", step=2, reason="x")
    await store.append_event(restart, pending=[step2])
    step3 = ev(t.id, 8, step=3, max_steps=10)
    await store.append_event(ev(t.id, 9, "tool_request", tool_use_id="tu_1"), status="awaiting_client",
                             pending=[step3])
    assert (await store.get_turn(t.id) or t).status == "awaiting_client"
    assert await store.claim_turn(t.id, "awaiting_client", "running")
    step4 = ev(t.id, 10, step=4, max_steps=10)
    await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(output_tokens=3),
                            steps=4, event=ev(t.id, 11, "turn_complete", status="complete"), pending=[step4])
    events = await store.events_after(t.id, 0)
    assert [(e.n, e.name) for e in events] == [
        (1, "turn_start"), (2, "step_start"), (4, "block_stop"), (5, "step_start"), (7, "step_restart"),
        (8, "step_start"), (9, "tool_request"), (10, "step_start"), (11, "turn_complete")]
    assert events[1] == step1 and events[3] == step2 and events[5] == step3 and events[7] == step4
    assert await store.events_after(t.id, 4) == events[3:]
    assert await store.last_event_n(t.id) == 11
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == [text(0)] and (got.status, got.steps) == ("complete", 4)


async def test_a_write_whose_pending_events_are_stale_stores_nothing(store: Store) -> None:
    t = await new_turn(store)
    await store.append_event(ev(t.id, 3))
    for stale in (3, 2):
        with pytest.raises(SeqConflictError):
            await store.append_block(t.id, text(0), stop(t.id, 5, text(0)), status="awaiting_client",
                                     pending=[ev(t.id, stale), ev(t.id, 4)])
        with pytest.raises(SeqConflictError):
            await store.append_event(ev(t.id, 5), status="awaiting_client", pending=[ev(t.id, stale)])
        with pytest.raises(SeqConflictError):
            await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(output_tokens=1),
                                    steps=1, event=ev(t.id, 5, "turn_complete"), pending=[ev(t.id, stale)])
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == [] and (got.status, got.steps) == ("running", 0)
    assert [e.n for e in await store.events_after(t.id, 0)] == [3]
    assert await store.last_event_n(t.id) == 3


async def test_pending_events_must_belong_to_the_write_and_come_before_it(store: Store) -> None:
    t = await new_turn(store)
    bad: list[list[StoredEvent]] = [
        [ev(t.id, 5)],                 # not below the write's own event
        [ev(t.id, 3), ev(t.id, 2)],    # not rising
        [ev(t.id, 2), ev(t.id, 2)],
        [ev("turn_other", 2)],         # another turn's
    ]
    for pending in bad:
        with pytest.raises(ValueError):
            await store.append_block(t.id, text(0), stop(t.id, 5, text(0)), pending=pending)
        with pytest.raises(ValueError):
            await store.append_event(ev(t.id, 5), pending=pending)
        with pytest.raises(ValueError):
            await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=1,
                                    event=ev(t.id, 5, "turn_complete"), pending=pending)
    with pytest.raises(ValueError):  # pending events need the write's own event
        await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=1,
                                pending=[ev(t.id, 2)])
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == [] and got.status == "running"
    assert await store.events_after(t.id, 0) == []


async def test_discarding_a_step_removes_its_blocks_and_frees_their_seqs(store: Store) -> None:
    t = await new_turn(store)
    plan = [text(0, 1), text(1, 1), text(2, 2, "partial"), text(3, 2, "partial")]
    for i, block in enumerate(plan):
        await store.append_block(t.id, block, stop(t.id, i + 1, block))
    await store.append_event(ev(t.id, 6, "step_restart", step=2, reason="stream broke"))
    await store.discard_step(t.id, 2)
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == plan[:2]
    # Events stay: the stored step_restart tells a replaying client to drop the step's blocks.
    assert [e.n for e in await store.events_after(t.id, 0)] == [1, 2, 3, 4, 6]
    assert await store.last_event_n(t.id) == 6
    with pytest.raises(SeqConflictError):
        await store.append_block(t.id, text(4, 2), stop(t.id, 7, text(4, 2)))
    await store.append_block(t.id, text(2, 2, "again"), stop(t.id, 7, text(2, 2, "again")))
    got = await store.get_turn(t.id)
    assert got is not None and [b.seq for b in got.blocks] == [0, 1, 2] and got.text == "again"
    await store.discard_step(t.id, 9)  # a step without blocks: nothing to do


# claim ---------------------------------------------------------------------
async def test_claim_turn_is_a_compare_and_set(store: Store) -> None:
    t = await new_turn(store)
    assert await store.claim_turn(t.id, "awaiting_client", "running") is False
    await store.set_status(t.id, "awaiting_client")
    assert await store.claim_turn(t.id, "awaiting_client", "running") is True
    assert await store.claim_turn(t.id, "awaiting_client", "running") is False
    assert (await store.get_turn(t.id) or t).status == "running"


async def test_concurrent_claims_let_exactly_one_win(store: Store, backend: Backend) -> None:
    t = await new_turn(store)
    async with backend.opened() as p1, backend.opened() as p2, backend.opened() as p3:
        claimers = [store, p1, p2, p3] if backend.shared else [store] * 4
        for _ in range(5):
            await store.set_status(t.id, "awaiting_client")
            wins = await asyncio.gather(*(s.claim_turn(t.id, "awaiting_client", "running") for s in claimers))
            assert sorted(wins) == [False, False, False, True]


# concurrent writers and a tailing reader -----------------------------------
async def test_a_tailing_reader_sees_every_event_once_in_order(store: Store, backend: Backend) -> None:
    per_turn = 30
    turns = [await new_turn(store), await new_turn(store)]
    async with backend.opened() as w1, backend.opened() as w2, backend.opened() as reader:
        writers = [w1, w2] if backend.shared else [store, store]
        watcher = reader if backend.shared else store
        for w, t in zip(writers, turns, strict=True):  # each writer owns the turn it writes
            await store.set_status(t.id, "awaiting_client")
            assert await w.claim_turn(t.id, "awaiting_client", "running")
        written: dict[str, list[int]] = {t.id: [] for t in turns}
        seen: dict[str, list[int]] = {t.id: [] for t in turns}
        done = asyncio.Event()

        async def write(writer: Store, turn_id: str) -> None:
            n = 0
            for seq in range(per_turn):
                n += 2  # a delta took the number before
                pending: list[StoredEvent] = []
                if seq % 3 == 0:
                    if seq % 2:  # on its own, or held back and stored with the block
                        await writer.append_event(ev(turn_id, n, step=seq))
                    else:
                        pending.append(ev(turn_id, n, step=seq))
                    written[turn_id].append(n)
                    n += 1
                await writer.append_block(turn_id, text(seq), stop(turn_id, n, text(seq)), pending=pending)
                written[turn_id].append(n)

        async def tail() -> None:
            while True:
                finished = done.is_set()  # read before polling: a final poll follows the last write
                fresh = 0
                for t in turns:
                    after = seen[t.id][-1] if seen[t.id] else 0
                    rows = await watcher.events_after(t.id, after)
                    seen[t.id].extend(e.n for e in rows)
                    fresh += len(rows)
                if finished and not fresh:
                    return
                await anyio.lowlevel.checkpoint()  # let the writers run (the memory store never yields)

        async def write_all() -> None:
            await asyncio.gather(*(write(w, t.id) for w, t in zip(writers, turns, strict=True)))
            done.set()

        await asyncio.gather(write_all(), tail())
    for t in turns:
        assert seen[t.id] == written[t.id]
        assert len(written[t.id]) == per_turn + per_turn // 3
        got = await store.get_turn(t.id)
        assert got is not None and [b.seq for b in got.blocks] == list(range(per_turn))


async def test_two_writers_racing_for_one_seq_leave_no_gap(store: Store, backend: Backend) -> None:
    """Two processes answering the same waiting turn at once (a running turn has one writer:
    its runner, see the ownership tests below)."""
    t = await new_turn(store)
    await store.set_status(t.id, "awaiting_client")
    async with backend.opened() as peer:
        rival = peer if backend.shared else store
        for seq in range(10):
            results = await asyncio.gather(
                store.append_block(t.id, text(seq, body="a"), stop(t.id, 2 * seq + 1, text(seq, body="a"))),
                rival.append_block(t.id, text(seq, body="b"), stop(t.id, 2 * seq + 2, text(seq, body="b"))),
                return_exceptions=True)
            assert sum(isinstance(r, SeqConflictError) for r in results) == 1, results
    got = await store.get_turn(t.id)
    assert got is not None and [b.seq for b in got.blocks] == list(range(10))
    events = await store.events_after(t.id, 0)
    assert [e.data["index"] for e in events] == list(range(10))
    assert [e.n for e in events] == sorted(e.n for e in events)


async def test_the_writes_of_many_turns_at_once_land_or_are_refused_each_as_alone(store: Store) -> None:
    """A busy process's writes, asked for together (SQLite commits them in one transaction,
    PostgreSQL sends those that queue as one statement: ``store/pg_batch.py``), come out as each
    would alone: stored whole, or refused with its own error while the others are stored."""
    turns = [await new_turn(store) for _ in range(12)]
    calls = turns[:4]
    for t in calls:
        await store.start_tool_calls(t.id, [ToolCallStart(f"call_{t.id}", "calc", f"key_{t.id}")])
    ended = await new_turn(store)  # its session has another turn open, so waking it collides
    await store.finish_turn(ended.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=1)
    await store.create_turn(ended.session_id, "again", model="scripted:x")
    last = {t.id: 0 for t in turns}
    stored: dict[str, list[int]] = {t.id: [] for t in turns}

    def event(t: Turn) -> StoredEvent:
        last[t.id] += 1
        stored[t.id].append(last[t.id])
        return ev(t.id, last[t.id], step=last[t.id])

    # a single event, a block with a held-back event before it, a block alone
    first: list[Any] = []
    for i, t in enumerate(turns):
        if i % 3 == 0:
            first.append(store.append_event(event(t)))
        else:
            pending = [event(t)] if i % 3 == 1 else []
            first.append(store.append_block(t.id, text(0), stop(t.id, last[t.id] + 1, text(0)), pending=pending))
            event(t)
    assert await asyncio.gather(*first, return_exceptions=True) == [None] * len(turns)

    # tool results that end ledger rows, a stale event number, a turn that does not exist
    stale = turns[5]
    second: list[Any] = []
    for i, t in enumerate(turns):
        if t in calls:
            result = ToolResultBlock(seq=0 if i % 3 == 0 else 1, step=1, tool_use_id=f"call_{t.id}", content="42",
                                     is_error=t is calls[1])
            second.append(store.append_block(t.id, result, stop(t.id, last[t.id] + 1, result)))
            event(t)
        elif t is stale:
            second.append(store.append_event(ev(t.id, last[t.id], step=0)))
        else:
            second.append(store.append_event(event(t)))
    second.append(store.append_event(ev("turn_missing", 1)))
    outcome = await asyncio.gather(*second, return_exceptions=True)
    assert isinstance(outcome[5], SeqConflictError) and "not above the last event" in str(outcome[5])
    assert isinstance(outcome[-1], NotFound)
    assert [o for i, o in enumerate(outcome[:-1]) if i != 5] == [None] * (len(turns) - 1)

    # every turn finished at once, with the collision among them
    third: list[Any] = [
        store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(output_tokens=i),
                          steps=i, error=f"note {i}", event=StoredEvent(t.id, last[t.id] + 1, "turn_complete",
                                                                          {"i": i}))
        for i, t in enumerate(turns)]
    for t in turns:
        event(t)
    third.append(store.append_event(ev(ended.id, 5), "running"))
    outcome = await asyncio.gather(*third, return_exceptions=True)
    assert isinstance(outcome[-1], TurnConflictError)
    assert outcome[:-1] == [None] * len(turns)

    for i, t in enumerate(turns):
        got = await store.get_turn(t.id)
        assert got is not None
        assert (got.status, got.stop_reason, got.steps, got.error, got.usage.output_tokens) == (
            "complete", "end_turn", i, f"note {i}", i)
        assert [e.n for e in await store.events_after(t.id, 0)] == stored[t.id]
        want = (["text"] if i % 3 else []) + (["tool_result"] if t in calls else [])
        assert [b.type for b in got.blocks] == want
    for t in calls:
        ledger = await store.tool_calls(t.id)
        assert [(c.state, c.is_error) for c in ledger] == [("finished", t is calls[1])]
    again = await store.get_turn(ended.id)
    assert again is not None and again.status == "complete"
    assert await store.events_after(ended.id, 0) == []
    if isinstance(store, PostgresStore):  # the three rounds did go in batches there
        assert store.batched_writes >= 3


# liveness, ownership and takeover ---------------------------------------------
async def test_a_live_runner_is_never_dead_and_its_turns_are_not_adopted(store: Store) -> None:
    running = await new_turn(store)
    assert await store.dead_runners() == set()
    assert await store.adopt_turns({"run_someone_else"}) == []
    assert (await store.get_turn(running.id) or running).status == "running"


@pytest.mark.durable
async def test_a_closed_runner_is_dead_at_once_and_its_turns_are_adopted_once(store: Store,
                                                                             backend: Backend) -> None:
    mine = await new_turn(store)
    async with backend.opened(runner_id="run_peer") as peer:
        theirs = await new_turn(peer)
        handed_over = await new_turn(peer)
        await peer.set_status(handed_over.id, "awaiting_client")
        assert await store.claim_turn(handed_over.id, "awaiting_client", "running")  # now ours
        # The peer is open, so alive (no timeout involved), and this store is never dead to itself.
        assert await store.dead_runners() == set()
        assert await peer.dead_runners() == set()
    # The peer closed its store (as a process that dies does): dead, with no wait.
    assert await store.dead_runners() == {"run_peer"}
    async with backend.opened() as third:
        adopted = await asyncio.gather(store.adopt_turns({"run_peer"}), third.adopt_turns({"run_peer"}))
        assert sorted(adopted[0] + adopted[1]) == [theirs.id]  # each turn goes to one adopter
    for t in (mine, theirs, handed_over):
        assert (await store.get_turn(t.id) or t).status == "running"


@pytest.mark.durable
async def test_runner_alive_follows_a_peer_store_being_open(store: Store, backend: Backend) -> None:
    async with backend.opened(runner_id="run_notebook_peer") as peer:
        assert await store.runner_alive("run_notebook_peer") is True
        assert await peer.runner_alive(store.runner_id) is True
    assert await store.runner_alive("run_notebook_peer") is False


@pytest.mark.durable
async def test_a_silent_runner_counts_as_dead_only_with_stale_after(store: Store, backend: Backend) -> None:
    async with backend.opened() as peer:
        await new_turn(peer)
        await new_turn(store)
        assert await store.dead_runners(stale_after=3600) == set()
        # A process alive but hung (no heartbeat within 0 s): gone for this store, which never is.
        assert await store.dead_runners(stale_after=0) == {peer.runner_id}


@pytest.mark.durable
async def test_only_the_owner_writes_a_running_turn(store: Store, backend: Backend) -> None:
    async with backend.opened() as peer:
        t = await new_turn(peer)
        block = text(0)
        with pytest.raises(TurnTakenOver):
            await store.append_block(t.id, block, stop(t.id, 2, block))
        with pytest.raises(TurnTakenOver):
            await store.append_event(ev(t.id, 2))
        with pytest.raises(TurnTakenOver):  # nor records that a call starts (it would run it again)
            await store.start_tool_calls(t.id, [ToolCallStart("tu_0", "send", "key-0")])
        with pytest.raises(TurnTakenOver):
            await store.finish_turn(t.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=1,
                                    event=ev(t.id, 2, "turn_complete"))
        await peer.aclose()
        assert await store.adopt_turns(await store.dead_runners()) == [t.id]
        await store.append_block(t.id, block, stop(t.id, 2, block))  # ours now
        await peer.open()  # the fixture closes it
        with pytest.raises(TurnTakenOver):  # and the old owner is refused
            await peer.append_event(ev(t.id, 3))


async def test_the_tool_effect_ledger(store: Store) -> None:
    t = await new_turn(store)
    calls = [ToolUseBlock(seq=i, step=1, tool_use_id=f"tu_{i}", name="send", input={}) for i in range(2)]
    for c in calls:
        await store.append_block(t.id, c, stop(t.id, c.seq + 2, c))
    await store.start_tool_calls(t.id, [ToolCallStart("tu_0", "send", "key-0"), ToolCallStart("tu_1", "send", "key-1")])
    ledger = await store.tool_calls(t.id)
    assert [(r.tool_use_id, r.state, r.attempts, r.idempotency_key) for r in ledger] == [
        ("tu_0", "started", 1, "key-0"), ("tu_1", "started", 1, "key-1")]
    result = ToolResultBlock(seq=2, step=1, tool_use_id="tu_0", content="sent", is_error=True)
    await store.append_block(t.id, result, stop(t.id, 4, result))  # its result ends the call
    await store.start_tool_calls(t.id, [ToolCallStart("tu_1", "send", "key-1")])  # a restart runs it again
    first, second = await store.tool_calls(t.id)
    assert (first.state, first.is_error, first.duration is not None and first.duration >= 0) == ("finished", True, True)
    assert (second.state, second.attempts, second.ended_at) == ("started", 2, None)
    with pytest.raises(KeyError):
        await store.start_tool_calls("turn_missing", [ToolCallStart("x", "send", "k")])


async def test_a_call_that_ends_before_its_result_block_keeps_its_result_and_its_end(store: Store) -> None:
    t = await new_turn(store)
    call = ToolUseBlock(seq=0, step=1, tool_use_id="tu_0", name="send", input={})
    await store.append_block(t.id, call, stop(t.id, 2, call))
    await store.start_tool_calls(t.id, [ToolCallStart("tu_0", "send", "key-0")])
    await store.end_tool_call(t.id, "tu_0", "sent to ann", False)
    await store.end_tool_call(t.id, "tu_other", "no row", False)  # a call with no row: nothing
    (row,) = await store.tool_calls(t.id)
    assert (row.state, row.result, row.is_error, row.ended_at is not None) == ("finished", "sent to ann", False, True)
    ended = row.ended_at
    result = ToolResultBlock(seq=1, step=1, tool_use_id="tu_0", content="sent to ann")
    await store.append_block(t.id, result, stop(t.id, 3, result))  # the block keeps the end already kept
    (row,) = await store.tool_calls(t.id)
    assert (row.state, row.ended_at) == ("finished", ended)
    await store.start_tool_calls(t.id, [ToolCallStart("tu_0", "send", "key-0")])  # run again: nothing kept
    (row,) = await store.tool_calls(t.id)
    assert (row.state, row.attempts, row.result, row.ended_at) == ("started", 2, None, None)
    with pytest.raises(KeyError):
        await store.end_tool_call("turn_missing", "x", "r", False)


async def test_tool_decisions_are_kept_per_call_and_a_later_one_replaces_it(store: Store) -> None:
    t = await new_turn(store)
    denied = ToolDecision("tu_1", "send", False, "user", "alice", 100.0, "not to that address")
    granted = ToolDecision("tu_2", "send", True, "session_grant", "alice", 101.0)
    await store.record_tool_decisions(t.id, [denied, granted])
    assert await store.tool_decisions(t.id) == [denied, granted]
    again = ToolDecision("tu_1", "send", True, "user", "bob", 102.0, always=True)  # asked again after a restart
    await store.record_tool_decisions(t.id, [again])
    assert await store.tool_decisions(t.id) == [granted, again]
    assert await store.tool_decisions("turn_missing") == []
    with pytest.raises(KeyError):
        await store.record_tool_decisions("turn_missing", [denied])


async def test_a_session_grant_is_kept_once_and_goes_with_its_session(store: Store) -> None:
    t = await new_turn(store)
    await store.record_tool_decisions(t.id, [ToolDecision("tu_1", "send", True, "user", "alice", 1.0, always=True)])
    await store.grant_tool(t.session_id, "send", "alice")
    await store.grant_tool(t.session_id, "send", "bob")  # the first grant stands
    await store.grant_tool(t.session_id, "calc", "bob")
    grants = await store.tool_grants(t.session_id)
    assert [(g.tool, g.granted_by) for g in grants] == [("calc", "bob"), ("send", "alice")]
    assert all(g.granted_at > 0 for g in grants)
    other = await store.create_session("usr_1")
    assert await store.tool_grants(other.id) == []
    with pytest.raises(KeyError):
        await store.grant_tool("ses_missing", "send", "alice")
    assert await store.delete_session(t.session_id)
    assert await store.tool_grants(t.session_id) == []
    assert await store.tool_decisions(t.id) == []


# budget counters ---------------------------------------------------------------

async def test_a_step_is_charged_once_to_each_of_its_scopes(store: Store) -> None:
    t = await new_turn(store)
    scopes = [f"turn:{t.id}", "session:s", "user:u:2026-11-24"]
    assert await store.budget_spend(scopes) == {s: Spend() for s in scopes}
    first = await store.charge_step(t.id, 1, scopes, 100, 7_000)
    assert first == {s: Spend(100, 7_000) for s in scopes}
    assert await store.charge_step(t.id, 1, scopes, 100, 7_000) is None  # the same step again: nothing added
    second = await store.charge_step(t.id, 2, scopes[1:], 50, 1)
    assert second == {s: Spend(150, 7_001) for s in scopes[1:]}
    await store.grant_budget("session:s", 1_000, 2)
    await store.grant_budget("session:s", 1, 0)
    assert (await store.budget_spend(["session:s", f"turn:{t.id}"])) == {
        "session:s": Spend(150, 7_001, 1_001, 2), f"turn:{t.id}": Spend(100, 7_000)}
    with pytest.raises(KeyError):
        await store.charge_step("turn_missing", 1, scopes, 1, 1)


async def test_concurrent_charges_to_one_scope_all_count(store: Store, backend: Backend) -> None:
    async with backend.opened() as peer:
        other = peer if backend.shared else store
        turns = [await new_turn(store, user=f"usr_{i}") for i in range(6)]
        await asyncio.gather(*[(store if i % 2 else other).charge_step(t.id, step, ["user:shared:day"], 3, 5)
                               for i, t in enumerate(turns) for step in (1, 2, 3)])
        assert await store.budget_spend(["user:shared:day"]) == {"user:shared:day": Spend(6 * 3 * 3, 6 * 3 * 5)}


@pytest.mark.durable
async def test_an_awaiting_turn_survives_a_restart(store: Store, backend: Backend) -> None:
    tools = [{"name": "pick_color"}]
    t = await new_turn(store, client_tools=tools)
    call = ToolUseBlock(seq=0, step=1, tool_use_id="tu_1", name="pick_color", input={})
    await store.append_block(t.id, call, stop(t.id, 2, call))
    await store.append_event(ev(t.id, 3, "tool_request", tool_use_id="tu_1"), status="awaiting_client")
    before = await store.get_turn(t.id)
    await store.aclose()
    async with backend.opened() as restarted:
        assert await restarted.dead_runners() == set()  # an awaiting turn has no runner to lose
        assert await restarted.get_turn(t.id) == before
        assert await restarted.client_tools(t.id) == tools
        assert await restarted.last_event_n(t.id) == 3
        assert await restarted.claim_turn(t.id, "awaiting_client", "running")
        result = ToolResultBlock(seq=1, step=1, tool_use_id="tu_1", content="red")
        await restarted.append_block(t.id, result, stop(t.id, 4, result))
    await store.open()  # the fixture closes it again


# schema --------------------------------------------------------------------
@pytest.mark.durable
async def test_migrations_are_recorded_once_and_reopening_is_harmless(store: Store, backend: Backend) -> None:
    assert backend.sql is not None
    t = await new_turn(store)
    await store.open()  # idempotent on an open store
    for _ in range(2):
        async with backend.opened():
            pass
    rows = await backend.sql("SELECT version, name FROM schema_migrations ORDER BY version")
    assert rows == [(1, "initial"), (2, "liveness_and_tool_calls"), (3, "notebook_files"),
                    (4, "audit"), (5, "budgets"), (6, "agents"), (7, "content_and_queue"),
                    (8, "tool_results"), (9, "branches")]
    assert await store.get_turn(t.id) is not None


@pytest.mark.durable
async def test_block_rows_carry_type_and_searchable_text(store: Store, backend: Backend) -> None:
    assert backend.sql is not None
    t = await new_turn(store)
    blocks: list[Block] = [text(0, body="nul\x00here"),
                           ToolUseBlock(seq=1, step=1, tool_use_id="a", name="f"),
                           ToolResultBlock(seq=2, step=1, tool_use_id="a", content="42")]
    for i, b in enumerate(blocks):
        await store.append_block(t.id, b, stop(t.id, i + 1, b))
    rows = await backend.sql("SELECT seq, step, block_type, text_content FROM blocks"
                             f" WHERE turn_id = '{t.id}' ORDER BY seq")
    assert rows == [(0, 1, "text", "nulhere"), (1, 1, "tool_use", None), (2, 1, "tool_result", "42")]
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == blocks  # the JSON keeps the NUL


# notebooks -----------------------------------------------------------------
async def test_notebooks_are_saved_with_rising_versions(store: Store) -> None:
    session = await store.create_session("usr_1")
    assert await store.load_notebook(session.id) is None
    doc: dict[str, Any] = {"cells": [{"id": "c1", "code": "x = 1", "language": "python", "outputs": []}]}
    assert await store.save_notebook(session.id, doc) == 1
    doc["cells"].append({"id": "c2", "code": "SELECT {{x}} AS é", "language": "sql", "outputs": [{"n": 1.5}]})
    assert await store.save_notebook(session.id, doc) == 2
    assert await store.load_notebook(session.id) == {**doc, "version": 2}
    other = await store.create_session("usr_1")
    assert await store.save_notebook(other.id, {"version": 7}) == 1  # the store's version, not the document's
    assert await store.load_notebook(other.id) == {"version": 1}


async def test_a_notebook_saved_on_a_stale_base_is_refused_and_nothing_is_stored(store: Store) -> None:
    session = await store.create_session("usr_1")
    with pytest.raises(StaleNotebook):
        await store.save_notebook(session.id, {"cells": []}, base=3)  # none saved yet: the base is 0
    assert await store.save_notebook(session.id, {"cells": [], "n": "first"}, base=0) == 1
    with pytest.raises(StaleNotebook):
        await store.save_notebook(session.id, {"cells": [], "n": "also first"}, base=0)  # a save came first
    assert await store.save_notebook(session.id, {"cells": [], "n": "second"}, base=1) == 2
    with pytest.raises(StaleNotebook) as refused:
        await store.save_notebook(session.id, {"cells": [], "n": "late"}, base=1)
    assert refused.value.base == 1
    assert await store.load_notebook(session.id) == {"cells": [], "n": "second", "version": 2}
    assert await store.save_notebook(session.id, {"cells": [], "n": "any"}) == 3  # no base: no condition


async def test_notebook_files_are_kept_whole_replaced_by_name_and_capped(store: Store) -> None:
    session = await store.create_session("usr_1")
    assert await store.notebook_files(session.id) == []
    data = bytes(range(256)) * 4  # every byte value, NUL included
    first = await store.put_notebook_file(session.id, "b.parquet", data, {"format": "parquet"}, max_total=2000)
    assert (first.name, first.size, first.info) == ("b.parquet", 1024, {"format": "parquet"})
    await store.put_notebook_file(session.id, "a.csv", b"x\n1\n", {"rows": 1}, max_total=2000)
    listed = await store.notebook_files(session.id)
    assert [(f.name, f.size) for f in listed] == [("a.csv", 4), ("b.parquet", 1024)]
    assert listed[1].sha256 == first.sha256 and len(first.sha256) == 64
    assert await store.notebook_file_data(session.id, "b.parquet") == data
    # Replacing a file counts its new size, not both; passing the total stores nothing.
    await store.put_notebook_file(session.id, "b.parquet", data + data[:900], {}, max_total=2000)
    with pytest.raises(FileTooLarge):
        await store.put_notebook_file(session.id, "c.json", b"[]" * 60, {}, max_total=2000)
    assert [f.name for f in await store.notebook_files(session.id)] == ["a.csv", "b.parquet"]
    assert await store.delete_notebook_file(session.id, "a.csv") is True
    assert await store.delete_notebook_file(session.id, "a.csv") is False
    assert await store.notebook_file_data(session.id, "a.csv") is None
    with pytest.raises(NotFound):
        await store.put_notebook_file("no-such-session", "a.csv", b"x", {})
    assert await store.delete_session(session.id)
    assert await store.notebook_files(session.id) == []


async def test_this_runner_is_alive_and_an_unknown_one_is_not(store: Store) -> None:
    assert await store.runner_alive(store.runner_id) is True
    assert await store.runner_alive("run_never_was") is False


# round trips ---------------------------------------------------------------
_texts = st.text(max_size=40)
_ids = st.text(min_size=1, max_size=12)
_origin = st.none() | _texts
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _texts
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=8,
)
_objects = st.dictionaries(_texts, _json, max_size=3)
_blocks = st.one_of(
    st.builds(TextBlock, text=_texts, citations=st.none() | st.lists(_objects, max_size=2)),
    st.builds(ThinkingBlock, thinking=_texts, signature=_texts, origin=_origin),
    st.builds(RedactedThinkingBlock, data=_texts, origin=_origin),
    st.builds(ToolUseBlock, tool_use_id=_ids, name=_ids, input=_objects, raw_input=st.none() | _texts,
              input_error=st.none() | _texts),
    st.builds(ToolResultBlock, tool_use_id=_ids, content=_texts, is_error=st.booleans()),
    st.builds(ProviderBlock, provider=_ids, data=_objects, origin=_origin),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=st.lists(st.tuples(_blocks, st.integers(1, 10)), min_size=1, max_size=5))
async def test_every_block_round_trips(store: Store, drawn: list[tuple[Block, int]]) -> None:
    t = await new_turn(store)
    blocks = [b.model_copy(update={"seq": i, "step": step}) for i, (b, step) in enumerate(drawn)]
    for i, b in enumerate(blocks):
        await store.append_block(t.id, b, stop(t.id, i + 1, b))
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == blocks
    assert (await store.list_turns(t.session_id))[0].blocks == blocks
    assert [e.data["block"] for e in await store.events_after(t.id, 0)] == [
        BLOCK_ADAPTER.dump_python(b, mode="json") for b in blocks]


# images and files; messages queued while a turn runs ---------------------------
async def test_blobs_are_stored_once_by_hash(store: Store, backend: Backend) -> None:
    data = bytes(range(256)) * 3  # NUL and every other byte value
    sha = await store.put_blob(data, "image/png")
    assert len(sha) == 64
    assert await store.put_blob(data, "image/png") == sha  # the same bytes: the same row
    other = await store.put_blob(b"%PDF-1.4 other", "application/pdf")
    assert other != sha
    assert await store.get_blobs([sha, other, "0" * 64]) == {sha: data, other: b"%PDF-1.4 other"}
    assert await store.get_blobs([]) == {}
    if backend.sql is not None:
        assert await backend.sql("SELECT count(*) FROM blobs") == [(2,)]


async def test_a_user_block_with_attachments_round_trips(store: Store) -> None:
    t = await new_turn(store)
    ref = Attachment(sha256="a" * 64, media_type="image/png", size=3, name="dot.png")
    block = UserBlock(seq=0, step=0, text="", attachments=[ref])
    result = ToolResultBlock(seq=1, step=1, tool_use_id="x", content="seen", attachments=[ref])
    await store.append_block(t.id, block, stop(t.id, 1, block))
    await store.append_block(t.id, result, stop(t.id, 2, result))
    got = await store.get_turn(t.id)
    assert got is not None and got.blocks == [block, result]


async def test_messages_queue_only_while_a_turn_runs_and_are_taken_once_in_order(store: Store) -> None:
    session = await store.create_session("usr_1")
    assert await store.queue_message(session.id, "too early") is None  # no turn yet
    t = await store.create_turn(session.id, "hello", model="scripted:x")
    ref = Attachment(sha256="b" * 64, media_type="application/pdf", size=9)
    first = await store.queue_message(session.id, "also this", [ref])
    second = await store.queue_message(session.id, "and that")
    assert first is not None and second is not None and first.id < second.id
    taken = await store.take_queued(session.id)
    assert [(m.text, m.attachments) for m in taken] == [("also this", [ref]), ("and that", [])]
    assert await store.take_queued(session.id) == []
    await store.set_status(t.id, "awaiting_client")
    assert await store.queue_message(session.id, "while it waits") is None
    await store.set_status(t.id, "running")
    assert await store.queue_message(session.id, "left behind") is not None
    assert await store.delete_session(session.id)
    assert await store.take_queued(session.id) == []


@pytest.mark.durable
async def test_a_queued_message_is_seen_by_another_process(store: Store, backend: Backend) -> None:
    session = await store.create_session("usr_1")
    await store.create_turn(session.id, "hello", model="scripted:x")
    async with backend.opened() as peer:
        assert await peer.queue_message(session.id, "from elsewhere") is not None
        blob = await peer.put_blob(b"GIF89a...", "image/gif")
    assert [m.text for m in await store.take_queued(session.id)] == ["from elsewhere"]
    assert await store.get_blobs([blob]) == {blob: b"GIF89a..."}


async def test_writes_asked_for_together_stand_or_fall_alone(store: Store) -> None:
    """Turn writes asked for in one pass of the event loop (SQLite commits them as one group):
    one refused undoes only itself, the others are stored."""
    turns = [await new_turn(store) for _ in range(4)]
    bad = turns[2]
    block = text(0)
    results = await asyncio.gather(
        store.append_block(turns[0].id, block, stop(turns[0].id, 2, block)),
        store.append_event(ev(turns[1].id, 2)),
        store.append_block(bad.id, text(5), stop(bad.id, 2, text(5))),  # seq 5 is not the next: refused
        store.append_event(ev(turns[3].id, 2)),
        return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["NoneType", "NoneType", "SeqConflictError", "NoneType"]
    assert [e.n for e in await store.events_after(turns[0].id, 1)] == [2]
    assert [e.n for e in await store.events_after(turns[1].id, 1)] == [2]
    assert await store.events_after(bad.id, 1) == []
    assert (await store.get_turn(bad.id) or bad).blocks == []
    assert [e.n for e in await store.events_after(turns[3].id, 1)] == [2]
