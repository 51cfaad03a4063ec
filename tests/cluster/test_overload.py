"""Overload: more turns than the cluster admits. Turns that stream (one frame every 40 ms,
more work than two cores carry for hundreds of them) fill the nodes past their starting
limit of 100 running turns each (their
clients leave once the turn started; the turns go on); then more are sent through HAProxy. Each
either starts within the admission wait (2 s, ``TURNSTREAM_ADMIT_WAIT_S``) or is refused
with 503, ``Retry-After`` and ``error: "overloaded"`` in under 100 ms (after HAProxy tried it
on the other nodes); none waits silently."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx2 as httpx
import pytest

from tests.cluster.client import StartCluster, client, new_session
from tests.support.mock_provider import MockHandle

FILL = 360
"""More than three nodes' starting limits (100 each), at a pace two cores cannot carry."""
EXCESS = 30


@dataclass
class Answer:
    status: int
    seconds: float
    """From the POST sent to the 503's headers, or to the turn's first event."""
    retry_after: str | None = None
    error: str | None = None


async def post_turn(lb: httpx.AsyncClient, sid: str) -> Answer:
    t0 = time.monotonic()
    async with lb.stream("POST", f"/api/sessions/{sid}/turns", json={"message": "hold"}) as r:
        if r.status_code != 200:
            await r.aread()
            return Answer(r.status_code, time.monotonic() - t0, r.headers.get("retry-after"),
                          r.json().get("error"))
        async for chunk in r.aiter_raw():
            if b"event: turn_start" in chunk:
                return Answer(200, time.monotonic() - t0)
    return Answer(0, time.monotonic() - t0, error="stream ended before turn_start")


async def sessions(lb: httpx.AsyncClient, n: int) -> list[str]:
    out: list[str] = []
    for first in range(0, n, 30):
        out += await asyncio.gather(*(new_session(lb, toolset="none") for _ in range(first, min(n, first + 30))))
    return out


@pytest.mark.timeout(300)
async def test_the_excess_is_refused_at_once(start_cluster: StartCluster, mock_provider: MockHandle,
                                             scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 4, "delay_ms": 40, "blocks": [{"type": "text", "text": "busy " * 600}]}]})
    cluster = start_cluster(f"anthropic:{model}")
    async with client(cluster.layout.lb_url, cluster.key, timeout=60) as lb:
        sids = await sessions(lb, FILL + EXCESS)
        fill = await asyncio.gather(*(post_turn(lb, sid) for sid in sids[:FILL]))
        assert {a.status for a in fill} <= {200, 503}, [a for a in fill if a.status not in (200, 503)][:3]
        excess = await asyncio.gather(*(post_turn(lb, sid) for sid in sids[FILL:]))
    answers = fill + excess
    refused = [a for a in answers if a.status == 503]
    admitted = [a for a in answers if a.status == 200]
    assert refused, "the cluster took every turn: it was never full"
    assert all(a.retry_after and int(a.retry_after) >= 1 and a.error == "overloaded" for a in refused), refused[:3]
    slow_refusals = sorted(round(a.seconds, 3) for a in refused if a.seconds >= 0.1)
    assert not slow_refusals, f"{len(slow_refusals)} of {len(refused)} refused, but not within 100 ms: {slow_refusals}"
    late = sorted(round(a.seconds, 2) for a in admitted if a.seconds > 2.0)
    assert not late, f"admitted turns that waited more than 2 s for their first event: {late}"
