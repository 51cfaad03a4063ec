"""Two ``turnstream serve`` processes on one PostgreSQL database: a tool result, an events
request or a cancel may reach the process that does not run the turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.sync.client import connect

from tests.support.server import Server, new_session, run_turn, server_pair, sse

pytestmark = pytest.mark.postgres

LOCATION = {"name": "get_location", "description": "Where the user is."}


@pytest.fixture
def pair(fresh_pg: str, tmp_path: Path, models: dict[str, str]) -> Iterator[tuple[Server, Server]]:
    with server_pair(tmp_path, fresh_pg, models["echo"]) as pair:
        yield pair


def test_client_tool_result_posted_to_the_other_process(pair: tuple[Server, Server], models: dict[str, str]) -> None:
    a, b = pair
    with a.client() as ca, b.client() as cb:
        sid = new_session(ca, model=models["client"], toolset="none")
        events = run_turn(ca, sid, "where am I?", client_tools=[LOCATION])
        pause = events[-1]
        assert pause.data["status"] == "awaiting_client"
        call_id = next(e for e in events if e.event == "tool_request").data["tool_use_id"]
        tid = pause.data["turn_id"]
        ws_url = a.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
        with connect(ws_url, subprotocols=["turnstream", f"turnstream.key.{a.key}"],  # type: ignore[list-item]
                     open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
            # A listens on process A; the result reaches process B, which continues the turn.
            with sse(ca, "GET", f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": pause.id}) as s:
                r = cb.post(f"/api/sessions/{sid}/tool-results", json={"tool_use_id": call_id, "content": "Bergen"})
                assert r.status_code == 200, r.text
                assert r.json()["resumed"] is True
                rest = s.rest()
            # Process A's WebSocket saw the events that process B produced.
            seen = []
            while True:
                msg = json.loads(ws.recv(timeout=15))
                if msg["type"] == "event":
                    seen.append(msg)
                    if msg["event"] == "turn_complete":
                        break
        ns = [e.n for e in rest]
        assert ns[0] == pause.n + 1
        assert ns == sorted(set(ns))
        assert rest[-1].data["status"] == "complete"
        final = [e.data["block"]["text"] for e in rest if e.event == "block_stop" and e.data["block"]["type"] == "text"]
        assert final == ["You are in Bergen."]
        assert [m["n"] for m in seen if m["event"] not in ("block_start", "block_delta")] == \
            [e.n for e in rest if e.event not in ("block_start", "block_delta")]
        # Both processes replay the same stored events.
        with sse(ca, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s1, \
                sse(cb, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s2:
            first_a = [(e.id, e.event) for e in s1.rest()]
            first_b = [(e.id, e.event) for e in s2.rest()]
        assert first_a == first_b
        assert first_a[-1][1] == "turn_complete"


def test_events_and_cancel_through_the_other_process(pair: tuple[Server, Server], models: dict[str, str]) -> None:
    a, b = pair
    with a.client() as ca, b.client() as cb:
        sid = new_session(ca, model=models["slow"], toolset="none")
        with sse(ca, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            it = iter(s)
            first = next(it)
            tid = first.data["turn_id"]
            # B follows a turn that A runs, live (deltas included) …
            with sse(cb, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as follow_b:
                fb = iter(follow_b)
                got_b = []
                for ev in fb:
                    got_b.append(ev)
                    if ev.event == "block_delta":
                        break
                # … and B asks A to cancel it.
                r = cb.post(f"/api/sessions/{sid}/turns/{tid}/cancel")
                assert r.status_code == 200, r.text
                assert r.json()["status"] == "cancelling"
                got_b += list(fb)
            rest = list(it)
        assert rest[-1].data["status"] == "cancelled"
        assert got_b[-1].data["status"] == "cancelled"
        ns = [e.n for e in got_b]
        assert ns == sorted(set(ns))
        stored = [e for e in [first, *rest] if e.event not in ("block_start", "block_delta")]
        assert {e.n for e in stored} <= set(ns)


def test_the_notebook_across_processes_files_edits_and_an_interrupt(pair: tuple[Server, Server]) -> None:
    """A file uploaded to B reaches a run in A's kernel; an edit made in B is what A runs; a
    cell running in A is interrupted through B (over the bus), and A's tabs see it end."""
    import threading
    import time

    from .test_notebook_api import CSV, add_cell, cells, nb_url, upload

    a, b = pair
    with a.client() as ca, b.client() as cb:
        sid = new_session(ca)
        assert upload(cb, sid, ("sales.csv", CSV)).status_code == 201
        cell = add_cell(ca, sid, "int(sales.units.sum())")
        assert ca.post(nb_url(sid, f"/cells/{cell['id']}/run")).json()["cell"]["outputs"] == [
            {"type": "text", "text": "290"}]
        cb.patch(nb_url(sid, f"/cells/{cell['id']}"), json={"code": "import time\ntime.sleep(60)"})
        box: dict[str, object] = {}

        def run() -> None:
            with a.client(timeout=60) as c2:
                box["run"] = c2.post(nb_url(sid, f"/cells/{cell['id']}/run")).json()

        runner = threading.Thread(target=run)
        runner.start()
        deadline = time.monotonic() + 20
        while cells(cb, sid)[0]["status"] != "running":  # B reads A's save
            assert time.monotonic() < deadline, "the cell never ran"
            time.sleep(0.02)  # polling the other process's view, with a deadline
        r = cb.post(nb_url(sid, f"/cells/{cell['id']}/interrupt"))
        assert r.json() == {"cell_id": cell["id"], "status": "interrupting"}
        runner.join(30)
        ended = box["run"]["cell"]  # type: ignore[index]
        assert ended["status"] == "error" and ended["outputs"][-1]["interrupted"] is True
        assert cells(cb, sid)[0]["status"] == "error"
