"""A network partition: a node's link is set down while it runs turns, so it loses
PostgreSQL and HAProxy at once. PostgreSQL drops its connections after its TCP keepalives
go unanswered (a few seconds: ``PG_SETTINGS`` in tests/support/cluster.py), its liveness
lock with them, and another node takes its turns over; the clients follow them there through
HAProxy. When the link comes back, the cut-off node, which still thinks it runs those turns
and gets the rest of its model streams, writes nothing to them (fencing: the store refuses
every write of a turn the process no longer owns), and it rejoins the rotation."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2 as httpx
import pytest

from tests.cluster.client import (
    Followed,
    StartCluster,
    check_stored,
    client,
    follow,
    new_session,
    no_gap_no_duplicate,
    runner_of,
    running_turns,
    start_turn,
    stored_events,
    text,
)
from tests.support.mock_provider import MockHandle

SLOW = "An answer that streams slowly enough for its node to be cut off half way through it. " * 5
CUT_OFF = 3


@pytest.mark.timeout(240)
async def test_a_partitioned_node_is_taken_over_and_rejoins_without_a_duplicate(
        start_cluster: StartCluster, mock_provider: MockHandle, scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 3, "delay_ms": 40, "blocks": [text(SLOW)]}]})
    cluster = start_cluster(f"anthropic:{model}")
    deadline = time.monotonic() + 120
    async with client(cluster.layout.node_url(CUT_OFF), cluster.key) as node, \
            client(cluster.layout.lb_url, cluster.key) as lb:
        sids = [await new_session(lb, toolset="none") for _ in range(3)]
        seen = [Followed(sid) for sid in sids]
        # the turns start on the node to be cut off, through its own port
        direct = [asyncio.create_task(start_turn(node, sid, "go", deadline, into=s))
                  for sid, s in zip(sids, seen, strict=True)]
        while not all(sum(e.event == "block_delta" for e in s.events) >= 5 for s in seen):
            assert not any(t.done() for t in direct), [s.refusals for s in seen]
            await asyncio.sleep(0.02)
        runner = await runner_of(cluster, CUT_OFF)
        assert await running_turns(cluster, runner) == {s.turn_id for s in seen}
        cluster.partition(CUT_OFF)
        cut_at = time.monotonic()
        for t in direct:  # their streams hang: the node can no longer answer
            t.cancel()
        await asyncio.gather(*direct, return_exceptions=True)
        while await running_turns(cluster, runner):
            assert time.monotonic() - cut_at < 20, "the cut-off node's turns were not taken over"
            await asyncio.sleep(0.1)
        took_over_s = time.monotonic() - cut_at
        # the clients follow them through HAProxy, from where they were
        await asyncio.gather(*(follow(lb, s, deadline) for s in seen))
        assert [s.end.data["status"] if s.end else None for s in seen] == ["complete"] * 3, took_over_s
        before = await _stored(lb, seen)
        for s in seen:
            assert [b["text"] for b in s.blocks()] == [SLOW]
            no_gap_no_duplicate(s, before[s.sid]["events"])
            check_stored(s, before[s.sid]["blocks"])

        cluster.heal(CUT_OFF)
        cluster.wait_balanced([CUT_OFF], timeout=60)  # /readyz answers 200 again
        while (await node.get("/healthz")).json()["live_turns"]:  # its stale turns give up
            assert time.monotonic() < deadline, "the rejoined node still runs the taken-over turns"
            await asyncio.sleep(0.1)
        assert await _stored(lb, seen) == before, "the cut-off node wrote to turns it no longer owned"
        # and it serves again
        again = await start_turn(node, await new_session(node, toolset="none"), "again", deadline)
        assert again.end is not None and again.end.data["status"] == "complete"


async def _stored(lb: httpx.AsyncClient, seen: list[Followed]) -> dict[str, dict[str, Any]]:
    out = {}
    for s in seen:
        turn = (await lb.get(f"/api/sessions/{s.sid}")).json()["turns"][0]
        events = await stored_events(lb, s.sid, s.turn_id)
        out[s.sid] = {"blocks": turn["blocks"], "status": turn["status"],
                      "events": events, "ids": [e.id for e in events]}
    return out
