"""What survives a restart of the server: a turn waiting for the client goes on when its
result arrives; a turn cut off by a crash becomes ``interrupted`` and the session goes on."""

from __future__ import annotations

from pathlib import Path

from tests.support.server import new_session, run_turn, sse, start_server


def test_waiting_turn_survives_a_restart(tmp_path: Path, models: dict[str, str]) -> None:
    srv = start_server(tmp_path, model=models["echo"])
    try:
        with srv.client() as c:
            sid = new_session(c, model=models["client"], toolset="none")
            events = run_turn(c, sid, "where am I?", client_tools=[{"name": "get_location"}])
            call_id = next(e for e in events if e.event == "tool_request").data["tool_use_id"]
    finally:
        assert srv.stop() == 0
    srv = start_server(tmp_path, model=models["echo"])
    try:
        assert "Created a local user" not in "\n".join(srv.output)  # the key file's key still works
        with srv.client() as c:
            r = c.post(f"/api/sessions/{sid}/tool-results", json={"tool_use_id": call_id, "content": "Nantes"})
            assert r.json()["resumed"] is True
            tid = events[0].data["turn_id"]
            with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events",
                     headers={"Last-Event-ID": events[-1].id}) as s:
                rest = s.rest()
        assert rest[-1].data["status"] == "complete"
        assert any(e.event == "block_stop" and e.data["block"].get("text") == "You are in Nantes." for e in rest)
    finally:
        srv.stop()


def test_a_crashed_turn_is_interrupted_and_the_session_goes_on(tmp_path: Path, models: dict[str, str]) -> None:
    srv = start_server(tmp_path, model=models["echo"])
    with srv.client() as c:
        sid = new_session(c, model=models["slow"], toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            it = iter(s)
            tid = next(it).data["turn_id"]
            for ev in it:
                if ev.event == "block_stop":  # the thinking block is stored; the text is streaming
                    break
            srv.proc.kill()
            srv.proc.wait(10)
    srv.stop()
    srv = start_server(tmp_path, model=models["echo"])
    try:
        with srv.client() as c:
            with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s:
                replay = s.rest()
            assert replay[-1].event == "turn_complete"
            assert replay[-1].data["status"] == "interrupted"
            assert c.get(f"/api/sessions/{sid}").json()["turns"][0]["status"] == "interrupted"
            c.post("/api/sessions", json={})  # unrelated work goes on
            r = c.patch(f"/api/sessions/{sid}")
            assert r.status_code == 405
            # The session takes its next message.
            nxt = run_turn(c, sid, "again")
            assert nxt[-1].data["status"] == "complete"
    finally:
        srv.stop()
