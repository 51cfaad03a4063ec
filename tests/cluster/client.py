"""A client of the cluster as a browser tab is one: it starts a turn, reads its events, and
when the stream breaks (its node died, was cut off or drained) it follows the turn again
from its ``Last-Event-ID``, through whatever address it was given (HAProxy, usually).

``Followed`` keeps every event with the time it arrived, how many times the client resumed,
and every answer that was not a stream (a 503, an error), so a test can assert no gap, no
duplicate, and what the user saw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx2 as httpx
import orjson

from tests.support.cluster import LocalCluster
from tests.support.server import Event
from turnstream.sse_decoder import SSEDecoder

STREAM_BREAKS = (httpx.TransportError, httpx.RemoteProtocolError)
StartCluster = Callable[..., LocalCluster]
"""The ``start_cluster`` fixture: ``start_cluster(model, nodes=3, **node_env)``."""
LOCATION = {"name": "get_location", "description": "Where the user is."}
"""A client tool: the browser answers it."""


@dataclass
class Followed:
    sid: str
    events: list[Event] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    """``time.monotonic()`` at which each event arrived."""
    resumes: int = 0
    refusals: list[tuple[int, str]] = field(default_factory=list)
    """(status, body) of every answer that was not an event stream."""
    retry_after: list[float] = field(default_factory=list)
    """The ``Retry-After`` of each refusal that had one."""

    @property
    def turn_id(self) -> str:
        return str(self.events[0].data["turn_id"])

    @property
    def end(self) -> Event | None:
        last = self.events[-1] if self.events else None
        return last if last is not None and last.event == "turn_complete" else None

    @property
    def last_id(self) -> str:
        return next(e.id for e in reversed(self.events) if e.id)

    def blocks(self) -> list[dict[str, Any]]:
        """The blocks acknowledged to the client (``block_stop``), less those of a step that
        was then restarted (``step_restart``: the client is told to drop them)."""
        kept: list[dict[str, Any]] = []
        for e in self.events:
            if e.event == "block_stop" and e.data.get("block"):
                kept.append(e.data["block"])
            elif e.event == "step_restart":
                kept = [b for b in kept if b.get("step") != e.data["step"]]
        return kept


async def _read(response: httpx.Response, into: Followed) -> bool:
    """Read events until the stream ends; True when ``turn_complete`` came (or a ``reconnect``
    asked the client to go elsewhere: False)."""
    decoder = SSEDecoder()
    async for chunk in response.aiter_raw():
        for ev in decoder.feed(chunk):
            if ev.event == "reconnect":  # the node drains: follow elsewhere
                return False
            into.events.append(Event(ev.id or "", ev.event, orjson.loads(ev.data) if ev.data else {}))
            into.arrived.append(time.monotonic())
            if ev.event == "turn_complete":
                return True
    return False


async def _stream(client: httpx.AsyncClient, method: str, url: str, into: Followed, **kw: Any) -> bool | None:
    """One request's stream into ``into``: True (ended), False (broke), None (refused)."""
    try:
        async with client.stream(method, url, **kw) as r:
            if r.status_code != 200:
                await r.aread()
                into.refusals.append((r.status_code, r.text))
                if "retry-after" in r.headers:
                    into.retry_after.append(float(r.headers["retry-after"]))
                return None
            return await _read(r, into)
    except STREAM_BREAKS:
        return False


async def follow(client: httpx.AsyncClient, into: Followed, deadline: float) -> Followed:
    """Follow ``into``'s turn from its last event until ``turn_complete``, resuming (through
    ``client``'s address) each time the stream breaks, until ``deadline`` (monotonic)."""
    while into.end is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"session {into.sid}: no turn_complete by the deadline "
                                 f"({len(into.events)} events, {into.resumes} resumes, refused {into.refusals})")
        into.resumes += 1
        url = f"/api/sessions/{into.sid}/turns/{into.turn_id}/events"
        if await _stream(client, "GET", url, into, headers={"Last-Event-ID": into.last_id}) is None:
            await asyncio.sleep(0.2)  # refused (a node that cannot read the store yet): ask again shortly
    return into


async def start_turn(client: httpx.AsyncClient, sid: str, message: str, deadline: float,
                     into: Followed | None = None, **body: Any) -> Followed:
    """POST a turn and follow it to its end; a refused POST (503) is recorded, not retried."""
    into = into or Followed(sid)
    done = await _stream(client, "POST", f"/api/sessions/{sid}/turns", into, json={"message": message, **body})
    if done is None or not into.events:
        return into
    return await follow(client, into, deadline)


async def start_turn_retrying(client: httpx.AsyncClient, sid: str, message: str, deadline: float,
                              into: Followed | None = None, **body: Any) -> Followed:
    """``start_turn`` as the web and terminal chats do it: a POST refused as overloaded (503,
    nothing stored) is sent again after its ``Retry-After``; every refusal is kept."""
    into = into or Followed(sid)
    while True:
        refused = len(into.refusals)
        await start_turn(client, sid, message, deadline, into, **body)
        if into.events or len(into.refusals) == refused:
            return into
        status, reply = into.refusals[-1]
        assert status == 503 and orjson.loads(reply)["error"] == "overloaded", into.refusals[-1]
        assert time.monotonic() < deadline, f"session {sid}: refused until the deadline: {into.refusals}"
        await asyncio.sleep(into.retry_after[-1])


async def new_session(client: httpx.AsyncClient, **body: Any) -> str:
    r = await client.post("/api/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def stored_events(client: httpx.AsyncClient, sid: str, tid: str) -> list[Event]:
    """The turn's events as stored, replayed from the start."""
    into = Followed(sid)
    assert await _stream(client, "GET", f"/api/sessions/{sid}/turns/{tid}/events", into) is True
    return into.events


def no_gap_no_duplicate(seen: Followed, stored: list[Event]) -> None:
    """Event ids rise strictly (no duplicate) and every stored event is among those the
    client received (no gap); live-only events (deltas) may be more, never fewer."""
    ns = [e.n for e in seen.events if e.id]
    assert ns == sorted(set(ns)), f"duplicate or out-of-order events: {ns}"
    missing = {e.id for e in stored} - {e.id for e in seen.events}
    assert not missing, f"stored events the client never got: {sorted(missing)}"


def client(url: str, key: str, timeout: float = 30.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"},
                             timeout=httpx.Timeout(timeout), limits=httpx.Limits(max_connections=None))


def sync_client(url: str, key: str, timeout: float = 30.0) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=httpx.Timeout(timeout))


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": tool, "input": args}


# who runs what, as the database says ----------------------------------------------------------

RUNNER_OF_ADDRESS = """
SELECT r.id FROM runners r
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
     AND l.classid = (r.lock_key >> 32)::oid AND l.objid = (r.lock_key & 4294967295)::oid
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE host(a.client_addr) = $1"""
"""The runner whose liveness lock is held by a connection from this address (a node)."""


async def runner_of(cluster: LocalCluster, node: int) -> str:
    conn = await asyncpg.connect(cluster.layout.admin_url, timeout=5)
    try:
        rows = await conn.fetch(RUNNER_OF_ADDRESS, cluster.layout.node_ip(node))
    finally:
        await conn.close()
    assert len(rows) == 1, f"node {node} holds {len(rows)} liveness locks"
    return str(rows[0]["id"])


async def running_turns(cluster: LocalCluster, runner: str) -> set[str]:
    """The turns the database says ``runner`` runs now."""
    conn = await asyncpg.connect(cluster.layout.admin_url, timeout=5)
    try:
        rows = await conn.fetch("SELECT id FROM turns WHERE status = 'running' AND runner_id = $1", runner)
    finally:
        await conn.close()
    return {str(r["id"]) for r in rows}


def check_stored(seen: Followed, stored_blocks: list[dict[str, Any]]) -> None:
    """Every block acknowledged to the client (and not withdrawn by a step restart) is stored
    as it was acknowledged, at its place: none lost, none changed."""
    for block in seen.blocks():
        assert block["seq"] < len(stored_blocks) and stored_blocks[block["seq"]] == block, \
            f"acknowledged block {block['seq']} of {seen.sid} not stored as sent"
