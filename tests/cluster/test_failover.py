"""A node killed (``kill -9``) while it streams and runs turns, everything else real: the
clients, reading through HAProxy, resume from their ``Last-Event-ID`` on another node; the
surviving nodes take the dead one's turns over (its liveness lock went with it) within 5 s;
nothing acknowledged is lost, no event is missed or shown twice; an idempotent call runs
again with its key, any other is put to the user and never run twice by itself."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.cluster.client import (
    Followed,
    StartCluster,
    call,
    check_stored,
    client,
    follow,
    new_session,
    no_gap_no_duplicate,
    runner_of,
    running_turns,
    start_turn,
    start_turn_retrying,
    stored_events,
    text,
)
from tests.support.cluster import LocalCluster
from tests.support.mock_provider import MockHandle
from tests.support.server import Event

SLOW = "A long answer that streams a few characters at a time, so a node can die half way. " * 5


async def live_node(cluster: LocalCluster, key: str) -> int:
    """The node that runs the one live turn (its ``/healthz`` counts it)."""
    for _ in range(200):
        for i in (1, 2, 3):
            async with client(cluster.layout.node_url(i), key) as c:
                if (await c.get("/healthz")).json()["live_turns"]:
                    return i
        await asyncio.sleep(0.05)
    raise AssertionError("no node says it runs the turn")


async def test_resume_through_haproxy_after_the_streaming_node_is_killed(
        start_cluster: StartCluster, mock_provider: MockHandle, scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 3, "delay_ms": 30, "blocks": [text(SLOW)]}]})
    cluster = start_cluster(f"anthropic:{model}")
    async with client(cluster.layout.lb_url, cluster.key) as lb:
        sid = await new_session(lb, toolset="none")
        seen = Followed(sid)
        turn = asyncio.create_task(start_turn(lb, sid, "go", time.monotonic() + 60, into=seen))
        while len([e for e in seen.events if e.event == "block_delta"]) < 10:
            assert not turn.done(), seen.refusals
            await asyncio.sleep(0.02)
        node = await live_node(cluster, cluster.key)
        cluster.kill_node(node)
        await turn
        assert seen.end is not None and seen.end.data["status"] == "complete"
        assert seen.resumes >= 1
        no_gap_no_duplicate(seen, await stored_events(lb, sid, seen.turn_id))
        assert any(e.event == "step_restart" for e in seen.events)  # the broken step was asked again
        assert [b["text"] for b in seen.blocks()] == [SLOW]
        stored = (await lb.get(f"/api/sessions/{sid}")).json()["turns"][0]["blocks"]
        check_stored(seen, stored)


def runs(folder: Path) -> list[dict[str, Any]]:
    log = folder / "runs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def _turn_to_its_end(lb: httpx.AsyncClient, sid: str, deadline: float) -> Followed:
    """A turn through HAProxy; a call put to the user after a take-over is denied (the user
    says: do not send it again), and the turn followed to its end."""
    seen = await start_turn_retrying(lb, sid, "go", deadline)
    while seen.end is not None and seen.end.data["status"] == "awaiting_client":
        asked = [e for e in seen.events if e.event == "tool_request"][-1]
        assert asked.data["requires_approval"] and "may already have run" in asked.data["note"], asked.data
        pause = seen.events[-1]  # kept (same id) under another name, so ``follow`` reads on past it
        seen.events[-1] = Event(pause.id, "turn_paused", pause.data)
        r = await lb.post(f"/api/sessions/{sid}/tool-results",
                          json={"tool_use_id": asked.data["tool_use_id"], "approved": False})
        assert r.status_code == 200, r.text
        await follow(lb, seen, deadline)
    return seen


@pytest.mark.timeout(300)
async def test_kill_9_of_a_node_while_100_turns_run(start_cluster: StartCluster, mock_provider: MockHandle,
                                                    runs_dir: Path, scenario_name: str) -> None:
    answer = {"fragment_size": 8, "delay_ms": 50, "blocks": [text("All done: {{last}}, and nothing twice.")]}
    models = [mock_provider.scenario(f"{scenario_name}-{tool}", {"steps": [
        {"blocks": [text("Working on it."), call(tool, seconds=4)]}, answer]})
        for tool in ("send_receipt", "reserve_seat")]
    cluster = start_cluster(f"anthropic:{models[0]}")
    deadline = time.monotonic() + 150
    async with client(cluster.layout.lb_url, cluster.key, timeout=60) as lb:
        sids = [await new_session(lb, toolset="none", model=f"anthropic:{models[i % 2]}") for i in range(100)]
        turns = [asyncio.create_task(_turn_to_its_end(lb, sid, deadline)) for sid in sids]
        while len(runs(runs_dir)) < 100:  # until every turn's call has started
            failed = [t for t in turns if t.done() and not _completed(t)]
            assert time.monotonic() < deadline and not failed, \
                f"turns did not start: {len(runs(runs_dir))} calls started; {failed[:1]}"
            await asyncio.sleep(0.05)
        runners = {i: await runner_of(cluster, i) for i in (1, 2, 3)}
        victim = max(runners, key=lambda i: len(runs_of_pid(runs_dir, cluster.node_pid(i))))
        orphans = await running_turns(cluster, runners[victim])
        assert orphans, "the node to kill runs no turn"
        cluster.kill_node(victim)
        killed_at = time.monotonic()
        while await running_turns(cluster, runners[victim]):  # taken over by the others
            assert time.monotonic() - killed_at <= 5, "the dead node's turns were not taken over within 5 s"
            await asyncio.sleep(0.05)
        seen = await asyncio.gather(*turns)
        statuses = Counter(s.end.data["status"] if s.end else None for s in seen)
        assert statuses == {"complete": 100}, statuses
        for s in seen:
            no_gap_no_duplicate(s, await stored_events(lb, s.sid, s.turn_id))
            check_stored(s, (await lb.get(f"/api/sessions/{s.sid}")).json()["turns"][0]["blocks"])
    starts = Counter((r["tool"], r["key"]) for r in runs(runs_dir) if r["what"] == "start")
    assert len(starts) == 100
    receipts = {k: n for (tool, k), n in starts.items() if tool == "send_receipt"}
    assert set(receipts.values()) == {1}, "a call that is not idempotent ran twice"
    seats = {k: n for (tool, k), n in starts.items() if tool == "reserve_seat"}
    assert set(seats.values()) <= {1, 2}
    asked = sum(1 for s in seen if any(e.event == "turn_paused" for e in s.events))
    rerun = sum(1 for n in seats.values() if n == 2)
    assert asked + rerun > 0, "no call was running on the killed node: the test proved nothing"


def _completed(task: asyncio.Task[Followed]) -> bool:
    if task.exception() is not None:
        return False
    end = task.result().end
    return end is not None and end.data["status"] == "complete"


def runs_of_pid(folder: Path, pid: int) -> list[dict[str, Any]]:
    return [r for r in runs(folder) if r["pid"] == pid]
