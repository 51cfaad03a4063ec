"""``store/pg_batch.WriteBatcher``: writes alone while a lane is free, the ones that queued
meanwhile together, and each write's own outcome whatever happened to its batch. The statements
are fakes here; the PostgreSQL store runs them for real in the store contract
(``test_the_writes_of_many_turns_at_once_land_or_are_refused_each_as_alone``)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pytest

from turnstream.store.pg_batch import WriteBatcher


@dataclass(frozen=True)
class W:
    turn_id: str
    tag: str = ""


class Refused(Exception):
    pass


@dataclass
class FakeDatabase:
    """Records what was sent; each statement waits until the test lets it through."""

    refuse: set[str] = field(default_factory=set)
    """Tags whose guard fails (alone and in a batch)."""
    fail_batches: bool = False
    sent: list[tuple[str, list[str]]] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def one(self, w: W) -> None:
        self.sent.append(("one", [w.tag]))
        await self.gate.wait()
        if w.tag in self.refuse:
            raise Refused(w.tag)

    async def many(self, ws: Sequence[W]) -> Collection[str]:
        self.sent.append(("many", [w.tag for w in ws]))
        await self.gate.wait()
        if self.fail_batches:
            raise RuntimeError("unique violation")
        return {w.turn_id for w in ws if w.tag not in self.refuse}


async def settle() -> None:
    """Let every task that can run, run (no clock involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_alone_while_a_lane_is_free_then_what_queued_in_one_statement() -> None:
    db = FakeDatabase()
    batcher = WriteBatcher(db.one, db.many, lanes=2)
    writes = [asyncio.ensure_future(batcher.write(W(f"t{i}", f"w{i}"))) for i in range(6)]
    await settle()
    assert db.sent == [("one", ["w0"]), ("one", ["w1"])]  # the lanes; the other four wait
    db.gate.set()
    await asyncio.gather(*writes)
    assert db.sent[2] == ("many", ["w2", "w3", "w4", "w5"])
    assert len(db.sent) == 3 and batcher.batches == 1


async def test_two_writes_of_one_turn_never_share_a_batch_and_keep_their_order() -> None:
    db = FakeDatabase()
    batcher = WriteBatcher(db.one, db.many, lanes=1)
    first = asyncio.ensure_future(batcher.write(W("a", "a0")))
    await settle()
    later = [asyncio.ensure_future(batcher.write(w)) for w in (W("a", "a1"), W("b", "b1"), W("a", "a2"))]
    await settle()
    db.gate.set()
    await asyncio.gather(first, *later)
    assert db.sent == [("one", ["a0"]), ("many", ["a1", "b1"]), ("one", ["a2"])]


async def test_a_write_its_batch_refused_is_sent_alone_and_raises_its_own_refusal() -> None:
    db = FakeDatabase(refuse={"w2"})
    batcher = WriteBatcher(db.one, db.many, lanes=1)
    writes = [asyncio.ensure_future(batcher.write(W(f"t{i}", f"w{i}"))) for i in range(4)]
    await settle()
    db.gate.set()
    outcome = await asyncio.gather(*writes, return_exceptions=True)
    assert [outcome[i] for i in (0, 1, 3)] == [None, None, None]
    assert isinstance(outcome[2], Refused) and str(outcome[2]) == "w2"
    assert db.sent == [("one", ["w0"]), ("many", ["w1", "w2", "w3"]), ("one", ["w2"])]


async def test_a_batch_that_fails_whole_sends_each_write_alone() -> None:
    db = FakeDatabase(fail_batches=True, refuse={"w3"})
    batcher = WriteBatcher(db.one, db.many, lanes=1)
    writes = [asyncio.ensure_future(batcher.write(W(f"t{i}", f"w{i}"))) for i in range(4)]
    await settle()
    db.gate.set()
    outcome = await asyncio.gather(*writes, return_exceptions=True)
    assert outcome[:3] == [None, None, None] and isinstance(outcome[3], Refused)
    assert db.sent == [("one", ["w0"]), ("many", ["w1", "w2", "w3"]), ("one", ["w1"]), ("one", ["w2"]),
                       ("one", ["w3"])]


async def test_a_queued_write_whose_caller_is_cancelled_is_still_sent_and_drain_waits_for_it() -> None:
    db = FakeDatabase()
    batcher = WriteBatcher(db.one, db.many, lanes=1)
    first = asyncio.ensure_future(batcher.write(W("t0", "w0")))
    await settle()
    queued = [asyncio.ensure_future(batcher.write(W(f"t{i}", f"w{i}"))) for i in (1, 2)]
    await settle()
    queued[0].cancel()
    await settle()
    assert not queued[0].done()  # it waits for its write, which nothing can take back now
    db.gate.set()
    await first
    await batcher.drain()
    assert db.sent == [("one", ["w0"]), ("many", ["w1", "w2"])]
    with pytest.raises(asyncio.CancelledError):
        await queued[0]
    await queued[1]


async def test_a_turns_next_write_waits_for_its_write_in_flight_even_with_a_lane_free() -> None:
    db = FakeDatabase()
    batcher = WriteBatcher(db.one, db.many, lanes=2)
    first = asyncio.ensure_future(batcher.write(W("a", "a0")))
    await settle()
    later = [asyncio.ensure_future(batcher.write(w)) for w in (W("a", "a1"), W("b", "b1"))]
    await settle()
    assert db.sent == [("one", ["a0"]), ("one", ["b1"])]  # b1 took the free lane; a1 did not
    db.gate.set()
    await asyncio.gather(first, *later)
    assert db.sent[2:] == [("one", ["a1"])]


async def test_drain_waits_for_a_write_queued_behind_one_sent_alone() -> None:
    db = FakeDatabase()
    batcher = WriteBatcher(db.one, db.many, lanes=2)
    writes = [asyncio.ensure_future(batcher.write(W("a", f"a{i}"))) for i in range(2)]
    await settle()
    drained = asyncio.ensure_future(batcher.drain())
    await settle()
    assert not drained.done() and db.sent == [("one", ["a0"])]
    db.gate.set()
    await drained
    assert db.sent == [("one", ["a0"]), ("one", ["a1"])]
    await asyncio.gather(*writes)
    await batcher.drain()  # nothing left: at once
