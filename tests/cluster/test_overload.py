"""Overload: more turns than the cluster admits. Turns that stream for half a minute (a frame
every 250 ms), each watched by its client, fill the nodes past the cap HAProxy gives each of
them (``TURNSTREAM_LB_TURNS``, 60 here); then more are sent through HAProxy, one after another.
Each either starts within the admission wait (2 s, ``TURNSTREAM_ADMIT_WAIT_S``) or is refused
with 503, ``Retry-After`` and ``error: "overloaded"``; the excess, sent once every node carries
its cap, in under 100 ms (HAProxy refuses it without asking a node); none waits silently."""

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


async def post_turn(lb: httpx.AsyncClient, sid: str, answered: asyncio.Future[Answer] | None = None,
                    leave: asyncio.Event | None = None) -> Answer:
    """POST a turn; its answer once refused or started. With ``answered`` and ``leave``: the
    answer goes to ``answered`` and the client keeps watching the turn until ``leave`` is set,
    as a user does (a stream watched holds its place at HAProxy)."""
    t0 = time.monotonic()

    def answer(a: Answer) -> Answer:
        if answered is not None and not answered.done():
            answered.set_result(a)
        return a

    async with lb.stream("POST", f"/api/sessions/{sid}/turns", json={"message": "hold"}) as r:
        if r.status_code != 200:
            await r.aread()
            return answer(Answer(r.status_code, time.monotonic() - t0, r.headers.get("retry-after"),
                                 r.json().get("error")))
        async for chunk in r.aiter_raw():
            if b"event: turn_start" in chunk:
                got = answer(Answer(200, time.monotonic() - t0))
                if leave is None:
                    return got
                await leave.wait()
                return got
    return answer(Answer(0, time.monotonic() - t0, error="stream ended before turn_start"))


async def sessions(lb: httpx.AsyncClient, n: int) -> list[str]:
    out: list[str] = []
    for first in range(0, n, 30):
        out += await asyncio.gather(*(new_session(lb, toolset="none") for _ in range(first, min(n, first + 30))))
    return out


@pytest.mark.timeout(300)
async def test_the_excess_is_refused_at_once(start_cluster: StartCluster, mock_provider: MockHandle,
                                             scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 4, "delay_ms": 250, "blocks": [{"type": "text", "text": "busy " * 100}]}]})
    cluster = start_cluster(f"anthropic:{model}")
    async with client(cluster.layout.lb_url, cluster.key, timeout=60) as lb:
        sids = await sessions(lb, FILL + EXCESS)
        leave = asyncio.Event()
        loop = asyncio.get_running_loop()
        answered: list[asyncio.Future[Answer]] = [loop.create_future() for _ in range(FILL)]
        watching = [asyncio.create_task(post_turn(lb, sid, got, leave))
                    for sid, got in zip(sids[:FILL], answered, strict=True)]
        fill = list(await asyncio.gather(*answered))
        assert {a.status for a in fill} <= {200, 503}, [a for a in fill if a.status not in (200, 503)][:3]
        # The excess arrives as users do, one after another, while the fill streams: each is
        # timed alone (a client sending hundreds at once would time its own backlog too).
        excess = [await post_turn(lb, sid) for sid in sids[FILL:]]
        leave.set()
        await asyncio.gather(*watching)
    answers = fill + excess
    refused = [a for a in answers if a.status == 503]
    admitted = [a for a in answers if a.status == 200]
    assert refused, "the cluster took every turn: it was never full"
    assert all(a.retry_after and int(a.retry_after) >= 1 and a.error == "overloaded" for a in refused), refused[:3]
    excess_refused = [a for a in excess if a.status == 503]
    assert excess_refused, f"the excess was taken: the cluster was not full ({[a.status for a in excess]})"
    slow_refusals = sorted(round(a.seconds, 3) for a in excess_refused if a.seconds >= 0.1)
    assert not slow_refusals, f"{len(slow_refusals)} of {len(excess_refused)} refused, but not within 100 ms: " \
                              f"{slow_refusals}"
    late = sorted(round(a.seconds, 2) for a in admitted if a.seconds > 2.0)
    assert not late, f"admitted turns that waited more than 2 s for their first event: {late}"
