"""What survives a restart of the server: a turn waiting for the client goes on when its
result arrives; a turn cut off by a crash is taken over and completes (or, if so set, becomes
``interrupted``), and the session goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.server import LONG_TEXT, new_session, run_turn, sse, start_server


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


@pytest.mark.parametrize("takeover", ["continue", "interrupt"])
def test_a_crashed_turn_goes_on_after_a_restart_and_so_does_the_session(tmp_path: Path, models: dict[str, str],
                                                                        takeover: str) -> None:
    """kill -9 mid-stream, then start again: by default the turn is taken over and completes
    by itself (its streaming step requested again); with TURNSTREAM_TAKEOVER=interrupt it
    ends ``interrupted``. Either way the session takes its next message."""
    env = {"TURNSTREAM_TAKEOVER": takeover}
    srv = start_server(tmp_path, model=models["echo"], env=env)
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
    srv = start_server(tmp_path, model=models["echo"], env=env)
    try:
        with srv.client() as c:
            with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as s:
                replay = s.rest()
            assert replay[-1].event == "turn_complete"
            status = "complete" if takeover == "continue" else "interrupted"
            assert replay[-1].data["status"] == status
            assert c.get(f"/api/sessions/{sid}").json()["turns"][0]["status"] == status
            if takeover == "continue":
                restart = next(e for e in replay if e.event == "step_restart")
                assert restart.data["step"] == 1  # the step that was streaming, requested again
                texts = [e.data["block"]["text"] for e in replay if e.event == "block_stop"
                         and e.data["block"]["type"] == "text" and e.n > restart.n]
                assert texts == [LONG_TEXT]
            c.post("/api/sessions", json={})  # unrelated work goes on
            r = c.patch(f"/api/sessions/{sid}")
            assert r.status_code == 405
            # The session takes its next message.
            nxt = run_turn(c, sid, "again")
            assert nxt[-1].data["status"] == "complete"
    finally:
        srv.stop()
