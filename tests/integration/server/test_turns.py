"""Turns over SSE: the event format, a three-step chain, resuming after a dropped
connection, one open turn per session, cancel."""

from __future__ import annotations

import httpx2 as httpx

from tests.support.server import Event, Server, new_session, run_turn, sse

STORED = {"turn_start", "step_start", "block_stop", "tool_request", "step_restart", "usage", "budget_warning",
          "turn_complete", "error"}


def _ids_rise_by_one(events: list[Event]) -> None:
    tid = events[0].data["turn_id"]
    assert all(e.id.startswith(tid + ":") for e in events)
    ns = [e.n for e in events]
    assert ns == list(range(ns[0], ns[0] + len(ns))), ns


def test_event_format_and_three_step_chain(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["chain"], toolset="calculator")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "compute"}) as s:
            tid = s.response.headers["x-turn-id"]
            events = s.rest()
            raw = s.raw
    assert raw.startswith(b"retry: ")
    assert f"id: {tid}:1\nevent: turn_start\ndata: ".encode() in raw
    assert events[0].event == "turn_start"
    assert events[0].data == {"turn_id": tid, "session_id": sid}
    _ids_rise_by_one(events)
    names = [e.event for e in events]
    assert names.count("step_start") == 3
    assert events[-1].event == "turn_complete"
    assert events[-1].data["status"] == "complete"
    assert events[-1].data["stop_reason"] == "end_turn"
    assert events[-1].data["steps"] == 3
    results = [e.data["block"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]
    assert [r["content"] for r in results] == ["5", "50"]
    deltas = [e for e in events if e.event == "block_delta" and "partial_json" in e.data]
    assert deltas and "input" in deltas[-1].data
    final = [e.data["block"]["text"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "text"]
    assert final[-1] == "The result is 50."


def test_resume_after_dropped_connection_has_no_gap_and_no_duplicate(server: Server,
                                                                      models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["slow"], toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            first: list[Event] = []
            for ev in s:
                first.append(ev)
                if ev.event == "block_delta" and ev.data["index"] == 1 and len(first) > 12:
                    break  # mid-text: drop the connection here
        tid = first[0].data["turn_id"]
        last_id = first[-1].id
        with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": last_id}) as s:
            second = s.rest()
        # Everything stored, from a fresh replay of the finished turn.
        with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s:
            replay = s.rest()
    assert second[0].n > first[-1].n
    assert second[-1].event == "turn_complete"
    ns = [e.n for e in second]
    assert ns == sorted(set(ns)), "duplicates or disorder after resuming"
    stored_after = [e.n for e in replay if e.n > first[-1].n]
    assert set(stored_after) <= set(ns), "a stored event is missing after resuming"
    assert {e.event for e in replay} <= STORED
    # Resumed live: the events of the text that was still streaming arrive as deltas.
    assert any(e.event == "block_delta" for e in second)
    text = "".join(e.data["text"] for e in first + second if e.event == "block_delta" and e.data["index"] == 1)
    stop = next(e for e in second if e.event == "block_stop" and e.data["index"] == 1)
    assert text == stop.data["block"]["text"]


def test_replay_with_bare_number_and_query_param(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        events = run_turn(c, sid, "abc")
        tid = events[0].data["turn_id"]
        with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": "2"}) as s:
            assert next(e.n for e in s.rest()) > 2
        with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events",
                 params={"last_event_id": events[-2].id}) as s:
            assert [e.event for e in s.rest()] == ["turn_complete"]
        for bad in ["abc", "-1", "1.5"]:
            r = c.get(f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": bad})
            assert r.status_code == 422, bad
            assert r.json()["message"].startswith("header.Last-Event-ID:")
        # The id of an event of another turn is well formed, and names no event of this one.
        r = c.get(f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": "turn_other:3"})
        assert r.status_code == 404 and "turn_other:3" in r.json()["message"]


def test_a_message_while_one_runs_is_queued_and_409_only_while_a_client_tool_waits(
        server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["slow"], toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "first"}) as s:
            it = iter(s)
            tid = next(it).data["turn_id"]
            r = c.post(f"/api/sessions/{sid}/turns", json={"message": "second"})
            assert r.status_code == 202, r.text  # steering (docs/steering.md): queued, not refused
            assert r.json()["outcome"] == "queued" and r.json()["turn_id"] == tid
            rest = list(it)
        assert rest[-1].data["status"] == "complete"
        # A turn that waits for a client tool's result takes no message: 409 naming the turn.
        cid = new_session(c, model=models["client"], toolset="none")
        events = run_turn(c, cid, "where am I?", client_tools=[{
            "name": "get_location", "description": "Where the user is.",
            "input_schema": {"type": "object", "properties": {"precision": {"type": "string"}}}}])
        assert events[-1].data["status"] == "awaiting_client"
        waiting = events[0].data["turn_id"]
        r = c.post(f"/api/sessions/{cid}/turns", json={"message": "hello?"})
        assert r.status_code == 409, r.text
        assert waiting in r.json()["message"]


def test_cancel_a_running_turn(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["slow"], toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            it = iter(s)
            tid = next(it).data["turn_id"]
            for ev in it:
                if ev.event == "block_delta" and ev.data["index"] == 1:
                    break
            r = c.post(f"/api/sessions/{sid}/turns/{tid}/cancel")
            assert r.status_code == 200, r.text
            assert r.json() == {"turn_id": tid, "status": "cancelled"}
            rest = list(it)
        end = rest[-1]
        assert end.event == "turn_complete"
        assert end.data["status"] == "cancelled"
        assert end.data["stop_reason"] == "cancelled"
        turn = c.get(f"/api/sessions/{sid}").json()["turns"][0]
        assert turn["status"] == "cancelled"
        text = next(b for b in turn["blocks"] if b["type"] == "text")
        assert 0 < len(text["text"]) < 1000  # the partial text is kept
        again = c.post(f"/api/sessions/{sid}/turns/{tid}/cancel")
        assert again.status_code == 409
        assert "cancelled" in again.json()["message"]


def test_a_client_that_disconnects_does_not_stop_the_turn(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["slow"], toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            tid = next(iter(s)).data["turn_id"]
        with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s:
            end = s.rest()[-1]
    assert end.data["status"] == "complete"


def test_ping_comments_while_waiting(server: Server, models: dict[str, str]) -> None:
    """The module's server pings every 0.3 s; a stream waiting on a paused turn gets them."""
    with server.client() as c:
        sid = new_session(c, model=models["client"], toolset="none")
        tools = [{"name": "get_location", "description": "Where the user is."}]
        events = run_turn(c, sid, "where am I?", client_tools=tools)
        done = events[-1]
        with c.stream("GET", f"/api/sessions/{sid}/turns/{done.data['turn_id']}/events",
                      headers={"Last-Event-ID": done.id}) as r:
            got = b""
            for chunk in r.iter_raw():
                got += chunk
                if got.count(b": ping") >= 2:
                    break
        assert b"event:" not in got
        # Leave the session clean for other tests: cancel the waiting turn.
        assert c.post(f"/api/sessions/{sid}/turns/{done.data['turn_id']}/cancel").json()["status"] == "cancelled"


def test_healthz_counts_live_turns(server: Server) -> None:
    assert httpx.get(server.url + "/healthz").json()["live_turns"] >= 0
