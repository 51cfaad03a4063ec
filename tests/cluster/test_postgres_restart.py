"""``pg_ctl restart -m fast`` of the cluster's PostgreSQL mid-turn: every connection of
every node is cut at once. Every turn ends, complete or failed with its reason (an ``error``
event naming what the database said), none is left running; every node reconnects (its
/readyz answers 200 again, HAProxy puts it back) and serves a new turn."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from tests.cluster.client import (
    Followed,
    StartCluster,
    check_stored,
    client,
    new_session,
    start_turn_retrying,
    text,
)
from tests.support.mock_provider import MockHandle

SLOW = "An answer still streaming while the database restarts under every node at once. " * 4


@pytest.mark.timeout(240)
async def test_postgres_restart_mid_turn(start_cluster: StartCluster, mock_provider: MockHandle,
                                         scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 3, "delay_ms": 30, "blocks": [text("First, a block stored."), text(SLOW)]}]})
    cluster = start_cluster(f"anthropic:{model}")
    deadline = time.monotonic() + 120
    async with client(cluster.layout.lb_url, cluster.key) as lb:
        sids = [await new_session(lb, toolset="none") for _ in range(6)]
        seen = [Followed(sid) for sid in sids]
        turns = [asyncio.create_task(start_turn_retrying(lb, sid, "go", deadline, into=s))
                 for sid, s in zip(sids, seen, strict=True)]
        while not all(sum(e.event == "block_delta" for e in s.events) >= 3 for s in seen):
            ended = [t for t in turns if t.done()]
            assert not ended, [t.exception() or t.result().events[-1:] for t in ended]
            await asyncio.sleep(0.02)
        await asyncio.to_thread(cluster.restart_postgres)
        await asyncio.gather(*turns)
        for s in seen:
            assert s.end is not None, s.sid
            status = s.end.data["status"]
            assert status in ("complete", "failed"), status
            if status == "failed":  # with its reason
                errors = [e for e in s.events if e.event == "error"]
                assert errors and errors[-1].data["message"], s.events[-3:]
        # nothing left running, nothing acknowledged lost
        conn = await asyncpg.connect(cluster.layout.admin_url, timeout=5)
        try:
            rows = await conn.fetch("SELECT status FROM turns")
        finally:
            await conn.close()
        assert len(rows) == 6 and "running" not in {r["status"] for r in rows}
        for s in seen:
            check_stored(s, (await lb.get(f"/api/sessions/{s.sid}")).json()["turns"][0]["blocks"])
    await asyncio.to_thread(cluster.wait_balanced, None, 60)
    for i in (1, 2, 3):
        async with client(cluster.layout.node_url(i), cluster.key) as node:
            again = await start_turn_retrying(node, await new_session(node, toolset="none"), "again", deadline)
            assert again.end is not None and again.end.data["status"] == "complete", (i, again.events[-2:])
