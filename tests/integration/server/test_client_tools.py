"""Client tools and approvals: the turn pauses with tool_request, the client answers by
tool_use_id, and the turn continues (in the background, followed via the events route)."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

from tests.support.server import Event, Server, new_session, run_turn, sse

LOCATION = {"name": "get_location", "description": "Where the user is.",
            "input_schema": {"type": "object", "properties": {"precision": {"type": "string"}}}}
TIME = {"name": "get_time", "description": "The user's local time."}


def _follow(c: httpx.Client, sid: str, last_event_id: str) -> list[Event]:
    tid = last_event_id.rpartition(":")[0]
    with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": last_event_id}) as s:
        return s.rest()


def _post(c: httpx.Client, sid: str, **body: Any) -> httpx.Response:
    return c.post(f"/api/sessions/{sid}/tool-results", json=body)


def test_client_tool_round_trip(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["client"], toolset="none")
        events = run_turn(c, sid, "where am I?", client_tools=[LOCATION])
        req = next(e for e in events if e.event == "tool_request")
        assert req.data["name"] == "get_location"
        assert req.data["input"] == {"precision": "city"}
        assert req.data["executor"] == "client"
        assert req.data["requires_approval"] is False
        done = events[-1]
        assert done.data["status"] == "awaiting_client"
        assert done.data["stop_reason"] == "awaiting_client"
        tid = done.data["turn_id"]
        assert c.get(f"/api/sessions/{sid}").json()["turns"][0]["status"] == "awaiting_client"

        r = _post(c, sid, tool_use_id=req.data["tool_use_id"], content="Lyon")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["resumed"] is True
        assert body["turn_id"] == tid
        rest = _follow(c, sid, body["last_event_id"])
        assert rest[0].n == done.n + 1, "the continuation starts right after the pause"
        result = next(e.data["block"] for e in rest if e.event == "block_stop")
        assert result["type"] == "tool_result"
        assert result["content"] == "Lyon"
        assert rest[-1].data["status"] == "complete"
        text = [e.data["block"]["text"] for e in rest if e.event == "block_stop" and e.data["block"]["type"] == "text"]
        assert text == ["You are in Lyon."]
        # The answered call cannot be answered again; the turn no longer waits.
        again = _post(c, sid, tool_use_id=req.data["tool_use_id"], content="Paris")
        assert again.status_code == 409


def test_results_of_a_step_in_any_order(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["parallel"], toolset="none")
        events = run_turn(c, sid, "where and when?", client_tools=[LOCATION, TIME])
        reqs = {e.data["name"]: e.data["tool_use_id"] for e in events if e.event == "tool_request"}
        assert set(reqs) == {"get_location", "get_time"}
        first = _post(c, sid, tool_use_id=reqs["get_time"], content="09:30")
        assert first.json()["resumed"] is False
        second = _post(c, sid, tool_use_id=reqs["get_location"], content="Oslo")
        assert second.json()["resumed"] is True
        rest = _follow(c, sid, events[-1].id)
        results = [e.data["block"] for e in rest
                   if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]
        # Stored in arrival order; replayed to the model in call order.
        assert [r["content"] for r in results] == ["09:30", "Oslo"]
        final = [e.data["block"]["text"] for e in rest if e.event == "block_stop" and e.data["block"]["type"] == "text"]
        assert final == ["Oslo at 09:30"]


def test_tool_result_errors(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["client"], toolset="none")
        assert _post(c, sid, tool_use_id="toolu_x", content="x").status_code == 409  # nothing waits
        events = run_turn(c, sid, "where am I?", client_tools=[LOCATION])
        call_id = next(e for e in events if e.event == "tool_request").data["tool_use_id"]
        r = _post(c, sid, tool_use_id="toolu_unknown", content="x")
        assert r.status_code == 404
        assert "toolu_unknown" in r.json()["message"]
        r = _post(c, sid, tool_use_id=call_id)
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.content:")
        r = _post(c, sid, tool_use_id=call_id, content="x", turn_id="turn_nope")
        assert r.status_code == 404
        r = c.post(f"/api/sessions/{sid}/tool-results", content=b'{"tool_use_id": ')
        assert r.status_code == 422
        # An is_error result is passed to the model as such.
        r = _post(c, sid, tool_use_id=call_id, content="permission denied by the browser", is_error=True)
        assert r.json()["resumed"] is True
        rest = _follow(c, sid, events[-1].id)
        result = next(e.data["block"] for e in rest if e.event == "block_stop")
        assert result["is_error"] is True
        assert rest[-1].data["status"] == "complete"


def test_client_may_decline_its_own_tool(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["client"], toolset="none")
        events = run_turn(c, sid, "where am I?", client_tools=[LOCATION])
        call_id = next(e for e in events if e.event == "tool_request").data["tool_use_id"]
        assert _post(c, sid, tool_use_id=call_id, approved=False).json()["resumed"] is True
        rest = _follow(c, sid, events[-1].id)
        result = next(e.data["block"] for e in rest if e.event == "block_stop")
        assert result["is_error"] is True
        assert "denied" in result["content"]


def _approval_turn(c: httpx.Client, models: dict[str, str]) -> tuple[str, list[Event], str]:
    sid = new_session(c, model=models["approval"], toolset="notebook")
    events = run_turn(c, sid, "delete the cell")
    req = next(e for e in events if e.event == "tool_request")
    assert req.data["name"] == "delete_cell"
    assert req.data["executor"] == "server"
    assert req.data["requires_approval"] is True
    assert events[-1].data["status"] == "awaiting_client"
    return sid, events, req.data["tool_use_id"]


def test_approval_approved_runs_the_tool(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid, events, call_id = _approval_turn(c, models)
        r = _post(c, sid, tool_use_id=call_id)
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.approved:")
        assert _post(c, sid, tool_use_id=call_id, approved=True).json()["resumed"] is True
        rest = _follow(c, sid, events[-1].id)
        result = next(e.data["block"] for e in rest if e.event == "block_stop")
        assert result["type"] == "tool_result"
        # The tool ran: the notebook says the cell does not exist (not "denied").
        assert "denied" not in result["content"]
        assert "cell_missing" in result["content"]
        assert rest[-1].data["status"] == "complete"


def test_approval_denied_gives_an_error_result(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid, events, call_id = _approval_turn(c, models)
        assert _post(c, sid, tool_use_id=call_id, approved=False).json()["resumed"] is True
        rest = _follow(c, sid, events[-1].id)
        result = next(e.data["block"] for e in rest if e.event == "block_stop")
        assert result["is_error"] is True
        assert "denied" in result["content"]
        final = [e.data["block"]["text"] for e in rest if e.event == "block_stop" and e.data["block"]["type"] == "text"]
        assert final and "denied" in final[0]


def test_cancel_a_turn_waiting_for_the_client(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["client"], toolset="none")
        events = run_turn(c, sid, "where am I?", client_tools=[LOCATION])
        tid = events[0].data["turn_id"]
        r = c.post(f"/api/sessions/{sid}/turns/{tid}/cancel")
        assert r.json() == {"turn_id": tid, "status": "cancelled"}
        rest = _follow(c, sid, events[-1].id)
        assert rest[0].event == "block_stop"
        assert rest[0].data["block"]["is_error"] is True
        assert rest[-1].data["status"] == "cancelled"
        # The transcript stays valid: the next message works.
        nxt = run_turn(c, sid, "again", client_tools=[LOCATION])
        assert nxt[-1].data["status"] == "awaiting_client"
