"""The bus's subscription queue and the follower's batches (what the SSE writes are made of)."""

from __future__ import annotations

import asyncio

from turnstream.bus import Bus, Envelope
from turnstream.server.follow import Follower
from turnstream.store.memory import MemoryStore


def env(n: int, name: str = "block_delta") -> Envelope:
    return Envelope("s1", "t1", n, name, {"index": 0, "text": str(n)})


async def test_get_returns_queued_items_in_order_and_none_after_the_timeout() -> None:
    bus = Bus()
    sub = bus.subscribe_turn("t1", "s1")
    bus.publish_envelope(env(1))
    bus.publish_envelope(env(2))
    first, second = await sub.get(5), await sub.get(5)
    assert isinstance(first, Envelope) and isinstance(second, Envelope)
    assert (first.n, second.n) == (1, 2)
    assert await sub.get(0.01) is None  # nothing more: the timeout answers


async def test_a_shorter_timeout_after_a_longer_one_still_fires() -> None:
    bus = Bus()
    sub = bus.subscribe_turn("t1", "s1")
    waiting = asyncio.ensure_future(sub.get(60))
    await asyncio.sleep(0)  # let it wait (scheduling, not synchronisation with another party)
    bus.publish_envelope(env(1))
    got = await waiting
    assert isinstance(got, Envelope)
    assert await asyncio.wait_for(sub.get(0.01), 5) is None


async def test_a_cancelled_get_loses_nothing() -> None:
    bus = Bus()
    sub = bus.subscribe_turn("t1", "s1")
    waiting = asyncio.ensure_future(sub.get())
    await asyncio.sleep(0)
    waiting.cancel()
    bus.publish_envelope(env(1))
    got = await sub.get(5)
    assert isinstance(got, Envelope) and got.n == 1
    sub.close()
    assert bus.listeners("turn", "t1") == 0


async def test_follower_batches_what_is_queued_together() -> None:
    bus = Bus()
    sub = bus.subscribe_turn("t1", "s1")
    follower = Follower(MemoryStore(), bus, "s1", "t1", 0, sub=sub, ping_interval=60)
    for n in (1, 2, 3):
        bus.publish_envelope(env(n))
    batches = follower.batches()
    first = await batches.__anext__()
    assert first is not None and [e.n for e in first] == [1, 2, 3]
    bus.publish_envelope(env(4))
    bus.publish_envelope(env(5, "turn_complete"))
    bus.publish_envelope(env(6))  # after turn_complete: not sent
    second = await batches.__anext__()
    assert second is not None and [e.n for e in second] == [4, 5]
    assert [b async for b in batches] == []
    assert bus.listeners("turn", "t1") == 0
