"""A server at capacity: a new turn waits at the admission gate, and one that finds the line
full gets 503 with Retry-After at once and leaves nothing behind (the app in-process, over ASGI,
with the gate's state set by the test: a real overload cannot be made on demand)."""

from __future__ import annotations

import asyncio

import httpx2 as httpx

from turnstream.bus import Bus
from turnstream.server.app import create_app
from turnstream.server.state import AppState, Settings
from turnstream.store import MemoryStore


async def test_a_turn_that_cannot_be_admitted_gets_503_and_stores_nothing() -> None:
    store = MemoryStore()
    await store.open()
    settings = Settings(db="memory://", model="scripted:echo", admit_max_lag=0.015, admit_wait=3600)
    state = AppState(settings=settings, store=store, bus=Bus())
    gate = state.turns.admission
    gate.interval = 3600.0  # no real tick: the test says how late the loop runs
    _, key = await store.create_user("ann")
    auth = {"Authorization": f"Bearer {key}"}
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(state)),
                                     base_url="http://test", headers=auth) as client:
            sid = (await client.post("/api/sessions", json={"model": "scripted:echo"})).json()["id"]
            gate.running = gate.limit  # as many turns run as the loop carries ...
            line = [asyncio.get_running_loop().create_future() for _ in range(gate.line())]
            gate._waiting.extend(line)  # ... and as many wait as may: the next is refused at once
            r = await asyncio.wait_for(client.post(f"/api/sessions/{sid}/turns", json={"message": "hello"}), 30)
            assert r.status_code == 503
            assert int(r.headers["retry-after"]) >= 1
            assert r.json()["error"] == "overloaded" and "capacity" in r.json()["message"]
            assert await store.list_turns(sid) == []
            assert gate.refused == 1 and gate.waiting == len(line)

            gate._waiting.clear()
            gate.running = 0  # they ended: the next message is admitted and streams
            r = await client.post(f"/api/sessions/{sid}/turns", json={"message": "hello"})
            assert r.status_code == 200 and "event: turn_complete" in r.text and "You said" in r.text
            openapi = (await client.get("/openapi.json")).json()
            assert "503" in openapi["paths"]["/api/sessions/{session_id}/turns"]["post"]["responses"]
    finally:
        await state.aclose()
        await store.aclose()
