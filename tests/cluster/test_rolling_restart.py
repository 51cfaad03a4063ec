"""A rolling restart while users chat: each node in turn gets SIGTERM (its /readyz answers
503 at once, so HAProxy stops sending it work; it lets its turns run for the shutdown grace,
then leaves them to the others and ends their streams with ``reconnect``), exits 0, is
started again, and the next one goes only once HAProxy finds it ready. No turn fails, no
request is refused: the clients only resume."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.cluster.client import (
    Followed,
    StartCluster,
    client,
    new_session,
    no_gap_no_duplicate,
    start_turn,
    stored_events,
    text,
)
from tests.support.cluster import LocalCluster
from tests.support.mock_provider import MockHandle

ANSWER = "Streaming along while the nodes restart one after another, without a stumble. " * 10
"""About 6 s at this pace: longer than the 1 s grace a stopping node gives its turns."""
USERS = 6


def roll(cluster: LocalCluster) -> list[int | None]:
    """SIGTERM, wait until HAProxy took the node out (its /readyz said 503) and it exited,
    start it again, wait until HAProxy finds it ready; node by node."""
    codes = []
    for i in (1, 2, 3):
        cluster.signal_node(i, signal.SIGTERM)
        cluster.wait_down(i)
        codes.append(cluster.wait_node_exit(i, 60))
        cluster.start_node(i)
        cluster.wait_balanced(timeout=60)
    return codes


@pytest.mark.timeout(300)
async def test_rolling_restart_while_turns_run(start_cluster: StartCluster, mock_provider: MockHandle,
                                               scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 4, "delay_ms": 30, "blocks": [text(ANSWER)]}]})
    cluster = start_cluster(f"anthropic:{model}", TURNSTREAM_SHUTDOWN_GRACE="1")
    deadline = time.monotonic() + 200
    done: list[Followed] = []
    rolling = True

    async def user(lb: object) -> None:
        async with client(cluster.layout.lb_url, cluster.key) as c:
            while rolling:
                sid = await new_session(c, toolset="none")
                done.append(await start_turn(c, sid, "hello", deadline))

    users = [asyncio.create_task(user(None)) for _ in range(USERS)]
    try:
        codes = await asyncio.to_thread(roll, cluster)
    finally:
        rolling = False
        await asyncio.gather(*users)
    assert codes == [0, 0, 0]
    assert len(done) >= USERS
    assert [s.refusals for s in done if s.refusals] == [], "a request was refused during the restart"
    assert [s.end.data["status"] if s.end else None for s in done] == ["complete"] * len(done)
    assert sum(s.resumes for s in done) > 0, "no turn was running on a stopping node: the test proved nothing"
    async with client(cluster.layout.lb_url, cluster.key) as lb:
        for s in done:
            no_gap_no_duplicate(s, await stored_events(lb, s.sid, s.turn_id))
            assert [b["text"] for b in s.blocks()] == [ANSWER]
