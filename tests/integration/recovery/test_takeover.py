"""No turn is ever stuck (issue 13): real ``turnstream serve`` processes on SQLite and PostgreSQL,
the model played by the mock provider over HTTP (which refuses any request the real API would,
so every follow-up request is checked), killed and stopped at known moments.

* ``kill -9`` while a tool runs, then a new server on the same database: the turn goes on by
  itself. An idempotent tool runs again with the same idempotency key; any other asks the user
  (approve runs it again, deny goes on without it).
* Two servers on one PostgreSQL database, ``kill -9`` of the one running a turn: the other takes
  it over with no restart, within the 5 s the test allows.
* SIGTERM with a second server (SQLite and PostgreSQL): the stopping one ends its stream with
  ``reconnect``; the client follows from its Last-Event-ID on the other and gets the rest, no gap,
  no duplicate.
* A call that ended while its sibling ran keeps its result; a kill mid-stream asks for the step
  again, and every request the mock received passes the provider's validators.
* The database's disk full mid-turn: the turn is held (its stream told so), a new session is a
  503 (never a 500), a cancel is answered at once; once space is back the turn ends cancelled,
  or failed with its reason when nobody cancelled; nothing acknowledged is lost.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import pg
from tests.support.mock_provider import MockHandle
from tests.support.pg import Cluster, scratch_schema_sync
from tests.support.processes import wait_for
from tests.support.server import Event, Server, new_session, sse, start_server
from turnstream.mock.validate import anthropic_errors

REPO = Path(__file__).resolve().parents[3]
TOOLS = "tests.integration.recovery.takeover_tools:TOOLS"
SLOW_TEXT = "This answer streams slowly, a few characters at a time, so a process can stop mid-way. " * 4


def _text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def serve(tmp_path: Path, db: str, mock: MockHandle, folder: Path, name: str = "server",
          **env: str) -> Server:
    return start_server(tmp_path, db=db, name=name, env={
        "ANTHROPIC_BASE_URL": mock.base_url, "ANTHROPIC_API_KEY": "test-key", "TURNSTREAM_TOOLS": TOOLS,
        "PYTHONPATH": str(REPO), "TURNSTREAM_TEST_TAKEOVER_DIR": str(folder),
        "TURNSTREAM_KEY_FILE": str(tmp_path / "login.key"), **env})  # one login key: one user on every server


def wait_started(folder: Path, timeout: float = 30.0) -> str:
    """The line a tool writes to the FIFO ``started`` when it begins (bounded wait)."""
    fd = os.open(folder / "started", os.O_RDONLY | os.O_NONBLOCK)
    try:
        deadline = time.monotonic() + timeout
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError("the tool did not start")
            data += os.read(fd, 100)
        return data.decode().strip()
    finally:
        os.close(fd)


def runs(folder: Path) -> list[dict[str, Any]]:
    log = folder / "runs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def follow(server: Server, sid: str, tid: str, last_id: str, timeout: float = 30.0) -> list[Event]:
    """The turn's events after ``last_id``, from ``server``, up to its ``turn_complete``."""
    with server.client(timeout=timeout) as c, sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events",
                                                  headers={"Last-Event-ID": last_id}) as s:
        return s.rest()


def kill_9(server: Server) -> None:
    server.proc.kill()
    server.proc.wait(10)
    server.stop()


@pytest.mark.parametrize("tool", ["charge_once", "send_email"])
def test_kill_9_while_a_tool_runs_then_restart(tmp_path: Path, db: str, mock_provider: MockHandle,
                                               folder: Path, tool: str, scenario_name: str) -> None:
    args = {"amount": 30} if tool == "charge_once" else {"to": "ann@example.com"}
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"blocks": [_text("On it."), {"type": "tool_use", "name": tool, "input": args}]},
        {"blocks": [_text("Result: {{last}}")]}]})
    srv = serve(tmp_path, db, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    with srv.client() as c:
        sid = new_session(c, toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            seen = s.until("block_stop") + s.until("block_stop")  # the text, then the call
            assert wait_started(folder) == tool
            kill_9(srv)
    tid, last_id = seen[0].data["turn_id"], seen[-1].id
    srv = serve(tmp_path, db, mock_provider, folder, name="restarted", TURNSTREAM_MODEL=f"anthropic:{model}")
    try:
        rest = follow(srv, sid, tid, last_id)
        if tool == "charge_once":
            # Taken over at start: the idempotent call ran again, with the same key.
            assert rest[-1].data["status"] == "complete"
            first, again = runs(folder)
            assert first["key"] == again["key"] == f"{tid}:{seen[-1].data['block']['tool_use_id']}"
            assert first["pid"] != again["pid"]
            assert "done (attempt 2)" in [e for e in rest if e.event == "block_stop"][-1].data["block"]["text"]
            return
        # Not idempotent: the user is asked, told it may have run.
        assert rest[-1].data["status"] == "awaiting_client" and len(runs(folder)) == 1
        request = next(e for e in rest if e.event == "tool_request")
        assert request.data["requires_approval"] and "may already have run" in request.data["note"]
        with srv.client() as c:
            r = c.post(f"/api/sessions/{sid}/tool-results",
                       json={"tool_use_id": request.data["tool_use_id"], "approved": True})
            assert r.json()["resumed"] is True
        final = follow(srv, sid, tid, rest[-1].id)
        assert final[-1].data["status"] == "complete" and len(runs(folder)) == 2
        assert "send_email done (attempt 2)" in [e for e in final if e.event == "block_stop"][-1].data["block"]["text"]
    finally:
        srv.stop()


def test_kill_9_mid_stream_then_restart_requests_the_step_again(tmp_path: Path, db: str,
                                                                mock_provider: MockHandle, folder: Path,
                                                                scenario_name: str) -> None:
    """kill -9 while the model's text streams (its thinking block stored), then a new server:
    the step is requested again (``step_restart``), its call runs, the turn completes, and every
    request the mock received is one the real API accepts (its validators, asserted here)."""
    model = mock_provider.scenario(scenario_name, {"fragment_size": 6, "delay_ms": 10, "steps": [
        {"blocks": [{"type": "thinking", "thinking": "Take a note.", "signature": "sig-1"},
                    _text(SLOW_TEXT), {"type": "tool_use", "name": "log_note", "input": {"text": "hi"}}]},
        {"blocks": [_text("Noted: {{last}}")]}]})
    srv = serve(tmp_path, db, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    with srv.client() as c:
        sid = new_session(c, toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            seen = s.until("block_stop")  # the thinking block is stored; the text streams
            assert seen[-1].data["block"]["type"] == "thinking"
            kill_9(srv)
    tid = seen[0].data["turn_id"]
    srv = serve(tmp_path, db, mock_provider, folder, name="restarted", TURNSTREAM_MODEL=f"anthropic:{model}")
    try:
        rest = follow(srv, sid, tid, seen[-1].id)
        assert rest[-1].data["status"] == "complete"
        restart = next(e for e in rest if e.event == "step_restart")
        assert restart.data["step"] == 1
        stored = [e.data["block"] for e in rest if e.event == "block_stop" and e.n > restart.n]
        assert [b["type"] for b in stored] == ["thinking", "text", "tool_use", "tool_result", "text"]
        assert stored[1]["text"] == SLOW_TEXT and stored[-1]["text"] == "Noted: noted: hi"
        assert [r["tool"] for r in runs(folder)] == ["log_note"]
        bodies = mock_provider.requests(model)
        assert len(bodies) == 3  # step 1, step 1 again, step 2
        assert [anthropic_errors(b) for b in bodies] == [None, None, None]
    finally:
        srv.stop()


def ledger(db: str, turn_id: str) -> dict[str, tuple[str, str | None]]:
    """The turn's tool-effect ledger as the database holds it: tool -> (state, kept result)."""
    query = f"SELECT tool, state, result FROM tool_calls WHERE turn_id = '{turn_id}'"
    if db.startswith("sqlite:///"):
        conn = sqlite3.connect(db.removeprefix("sqlite:///"))
        try:
            rows = conn.execute(query).fetchall()
        finally:
            conn.close()
    else:
        rows = pg.run(pg.fetch(db, query))
    return {r[0]: (r[1], r[2]) for r in rows}


def test_a_call_that_ended_before_the_kill_keeps_its_result(tmp_path: Path, db: str, mock_provider: MockHandle,
                                                           folder: Path, scenario_name: str) -> None:
    """Two calls of one step run side by side: ``log_note`` (not idempotent) ends, ``charge_once``
    still runs when the server is killed. The server that takes the turn over keeps the note's
    result from the ledger (it neither runs it again nor asks about it) and runs the charge again."""
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"blocks": [{"type": "tool_use", "name": "log_note", "input": {"text": "hi"}},
                    {"type": "tool_use", "name": "charge_once", "input": {"amount": 7}}]},
        {"blocks": [_text("Both: {{last}}")]}]})
    srv = serve(tmp_path, db, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    with srv.client() as c:
        sid = new_session(c, toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            seen = s.until("block_stop") + s.until("block_stop")  # the two calls
            assert wait_started(folder) == "charge_once"
            tid = seen[0].data["turn_id"]
            wait_for("the note's end in the ledger",
                     lambda: ledger(db, tid).get("log_note", ("", None))[0] == "finished")
            kill_9(srv)
    assert ledger(db, tid)["log_note"] == ("finished", "noted: hi")
    srv = serve(tmp_path, db, mock_provider, folder, name="restarted", TURNSTREAM_MODEL=f"anthropic:{model}")
    try:
        rest = follow(srv, sid, tid, seen[-1].id)
        assert rest[-1].data["status"] == "complete" and not [e for e in rest if e.event == "tool_request"]
        assert sorted(r["tool"] for r in runs(folder)) == ["charge_once", "charge_once", "log_note"]
        results = [e.data["block"] for e in rest
                   if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]
        assert [r["content"] for r in results] == ["noted: hi", "charge_once done (attempt 3)"]
    finally:
        srv.stop()


def test_a_denied_repeat_goes_on_without_the_call(tmp_path: Path, db: str, mock_provider: MockHandle, folder: Path,
                                                  scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"blocks": [{"type": "tool_use", "name": "send_email", "input": {"to": "bob@example.com"}}]},
        {"blocks": [_text("Then: {{last}}")]}]})
    srv = serve(tmp_path, db, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    with srv.client() as c:
        sid = new_session(c, toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
            seen = s.until("block_stop")
            wait_started(folder)
            kill_9(srv)
    tid = seen[0].data["turn_id"]
    srv = serve(tmp_path, db, mock_provider, folder, name="restarted", TURNSTREAM_MODEL=f"anthropic:{model}")
    try:
        rest = follow(srv, sid, tid, seen[-1].id)
        request = next(e for e in rest if e.event == "tool_request")
        with srv.client() as c:
            c.post(f"/api/sessions/{sid}/tool-results",
                   json={"tool_use_id": request.data["tool_use_id"], "approved": False}).raise_for_status()
        final = follow(srv, sid, tid, rest[-1].id)
        assert final[-1].data["status"] == "complete" and len(runs(folder)) == 1  # not run again
        result = next(e for e in final if e.event == "block_stop" and e.data["block"]["type"] == "tool_result")
        assert result.data["block"]["is_error"] and "may already have run" in result.data["block"]["content"]
    finally:
        srv.stop()


@pytest.mark.postgres
def test_a_second_server_takes_a_dead_ones_turn_over(tmp_path: Path, pg_url: str, mock_provider: MockHandle,
                                                     folder: Path, scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"blocks": [_text("Charging."), {"type": "tool_use", "name": "charge_once", "input": {"amount": 5}}]},
        {"blocks": [_text("Charged: {{last}}")]}]})
    with scratch_schema_sync(pg_url, "takeover") as db:
        a = serve(tmp_path, db, mock_provider, folder, name="a", TURNSTREAM_MODEL=f"anthropic:{model}")
        b = serve(tmp_path, db, mock_provider, folder, name="b", TURNSTREAM_MODEL=f"anthropic:{model}")
        try:
            with a.client() as c:
                sid = new_session(c, toolset="none")
                with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
                    seen = s.until("block_stop") + s.until("block_stop")
                    wait_started(folder)
                    kill_9(a)
            # b was running all along: it sees a's liveness lock gone and takes the turn over.
            rest = follow(b, sid, seen[0].data["turn_id"], seen[-1].id, timeout=5)
            assert rest[-1].data["status"] == "complete"
            assert [r["pid"] for r in runs(folder)] == [a.proc.pid, b.proc.pid]
        finally:
            b.stop()


def test_sigterm_hands_the_turn_to_another_server_and_the_client_resumes(
        tmp_path: Path, db: str, mock_provider: MockHandle, folder: Path, scenario_name: str) -> None:
    """Two servers on one database (SQLite: one file; PostgreSQL: one schema), SIGTERM to the
    one running the turn: it ends its stream with ``reconnect``, the other takes the turn over,
    and the client follows it there from its Last-Event-ID: no gap, no duplicate."""
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 3, "delay_ms": 40, "blocks": [_text(SLOW_TEXT)]}]})
    env = {"TURNSTREAM_MODEL": f"anthropic:{model}", "TURNSTREAM_SHUTDOWN_GRACE": "0.3"}
    a = serve(tmp_path, db, mock_provider, folder, name="a", **env)
    b = serve(tmp_path, db, mock_provider, folder, name="b", **env)
    try:
        with a.client() as c:
            sid = new_session(c, toolset="none")
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
                first = [next(iter(s)) for _ in range(6)]  # turn_start, step_start, a block and deltas
                a.proc.send_signal(signal.SIGTERM)
                first += s.rest()
        assert a.proc.wait(30) == 0
        assert first[-1].event == "reconnect" and not first[-1].id  # not a turn event: no id
        before = [e for e in first if e.id]
        rest = follow(b, sid, before[0].data["turn_id"], before[-1].id)
        ids = [e.n for e in before + rest]
        assert ids == sorted(set(ids))  # rising: no duplicate
        assert rest[-1].data["status"] == "complete"
        texts = [e.data["block"]["text"] for e in rest if e.event == "block_stop"]
        assert texts == [SLOW_TEXT]  # the step was requested again on b and streamed whole
        assert any(e.event == "step_restart" for e in rest)
    finally:
        a.stop()
        b.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB filesystem of its own (tmpfs), so a test can fill it."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)], check=True, capture_output=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("then", ["cancel", "space_back"])
def test_disk_full_mid_turn_holds_the_turn_then_ends_it(tmp_path: Path, small_disk: Path, mock_provider: MockHandle,
                                                        folder: Path, scenario_name: str, then: str) -> None:
    """The turn is held while the disk is full; a cancel is answered at once and ends it
    ``cancelled`` once space is back; with no cancel, space coming back ends it ``failed`` with
    an ``error`` saying why. Either way nothing acknowledged is lost and the server goes on."""
    # The second block is large and slow: its write needs new room in the WAL file.
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 2000, "delay_ms": 10, "blocks": [_text("First part."), _text("x" * 400_000)]}]})
    db = f"sqlite:///{small_disk / 'turns.db'}"
    srv = serve(tmp_path, db, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    filler = small_disk / "filler"
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
                seen = s.until("block_stop")  # "First part." is stored
                # fill the disk while the second block streams (unbuffered: closing it has nothing
                # left to write, whatever room the last write found)
                with filler.open("wb", buffering=0) as f:
                    try:
                        while True:
                            f.write(b"\0" * 65536)
                            f.flush()
                    except OSError:
                        pass
                seen += s.until("error")  # the stream is told the turn is held
                assert seen[-1].data["code"] == "store_unavailable" and seen[-1].data["retryable"]
                r = c.post("/api/sessions", json={})
                assert r.status_code == 503 and r.json()["error"] == "store_unavailable"
                tid = seen[0].data["turn_id"]
                if then == "cancel":
                    r = c.post(f"/api/sessions/{sid}/turns/{tid}/cancel")  # answered, though the turn can't end yet
                    assert r.status_code == 200 and r.json()["status"] in ("cancelled", "cancelling")
                filler.unlink()  # space is back: the turn ends
                seen += s.rest()
        status = "cancelled" if then == "cancel" else "failed"
        assert seen[-1].event == "turn_complete" and seen[-1].data["status"] == status
        if then == "space_back":
            error = [e for e in seen if e.event == "error"][-1]
            assert error.data["code"] == "store_error" and "could not be stored" in error.data["message"]
        with srv.client() as c:
            stored = c.get(f"/api/sessions/{sid}").json()["turns"][0]
            acknowledged = [e.data["block"] for e in seen if e.event == "block_stop"]
            assert stored["status"] == status and stored["blocks"][:len(acknowledged)] == acknowledged
            assert c.post("/api/sessions", json={}).status_code == 201
    finally:
        filler.unlink(missing_ok=True)
        srv.stop()


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte (unbuffered, so closing the file has nothing left to write)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


@pytest.mark.postgres
def test_postgres_disk_full_mid_turn_holds_the_turn_then_ends_it(tmp_path: Path, pg_on_small_disk: tuple[Cluster, Path],
                                                                 mock_provider: MockHandle, folder: Path,
                                                                 scenario_name: str) -> None:
    """The same on PostgreSQL: its data disk full while a large block streams, the write fails
    (could not extend file), the turn is held and its stream told so, a new session is created
    or refused with a 503 (never a 500); once space is back the turn ends failed with its
    reason, nothing acknowledged lost."""
    cluster, disk = pg_on_small_disk
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 2000, "delay_ms": 10, "blocks": [_text("First part."), _text("x" * 400_000)]}]})
    srv = serve(tmp_path, cluster.url, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    filler: Path | None = None
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
                seen = s.until("block_stop")  # "First part." is stored
                filler = fill(disk)
                seen += s.until("error")
                assert seen[-1].data["code"] == "store_unavailable" and seen[-1].data["retryable"]
                r = c.post("/api/sessions", json={})  # a small row may still fit in a page PostgreSQL has
                assert r.status_code in (201, 503), r.text
                filler.unlink()  # space is back: the turn ends
                seen += s.rest()
        assert seen[-1].event == "turn_complete" and seen[-1].data["status"] == "failed"
        error = [e for e in seen if e.event == "error"][-1]
        assert error.data["code"] == "store_error" and "could not be stored" in error.data["message"]
        with srv.client() as c:
            stored = c.get(f"/api/sessions/{sid}").json()["turns"][0]
            acknowledged = [e.data["block"] for e in seen if e.event == "block_stop"]
            assert stored["status"] == "failed" and stored["blocks"][:len(acknowledged)] == acknowledged
            assert c.post("/api/sessions", json={}).status_code == 201
    finally:
        if filler is not None:
            filler.unlink(missing_ok=True)
        srv.stop()


@pytest.mark.postgres
def test_a_notebook_goes_on_in_another_server(tmp_path: Path, pg_url: str, mock_provider: MockHandle,
                                              folder: Path, scenario_name: str) -> None:
    """A session's kernel lives in one process. When its next turn runs in another, that one
    reads the notebook the first saved, starts a kernel of its own and re-runs what the graph
    needs; the first sees the second's changes at its next look. Nothing is lost."""
    def use(name: str, **args: Any) -> dict[str, Any]:
        return {"blocks": [{"type": "tool_use", "name": name, "input": args}]}

    model = mock_provider.scenario(scenario_name, {"turns": [
        [use("create_cell", code="x = 21"), use("run_cell", cell_id="{{last.cell_id}}"),
         {"blocks": [_text("ran {{last.status}}")]}],
        [use("create_cell", code="y = x * 2\ny"), use("run_cell", cell_id="{{last.cell_id}}"),
         {"blocks": [_text("y is {{last.outputs[0].text}}, after {{last.ran_upstream}}")]}]]})
    env = {"TURNSTREAM_MODEL": f"anthropic:{model}"}
    with scratch_schema_sync(pg_url, "takeover") as db:
        a = serve(tmp_path, db, mock_provider, folder, name="a", **env)
        b = serve(tmp_path, db, mock_provider, folder, name="b", **env)
        try:
            with a.client() as c:
                sid = new_session(c, toolset="notebook")
                with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "one"}) as s:
                    first = s.rest()
            assert first[-1].data["status"] == "complete" and "ran success" in _answer(first)
            with b.client() as c, sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "two"}) as s:
                second = s.rest()
            assert second[-1].data["status"] == "complete"
            answer = _answer(second)
            assert answer.startswith('y is 42, after ["') and answer.endswith('"]')  # x = 21 ran again in b
            # a, whose copy of the notebook is older, sees b's cell and its output.
            state = _notebook_over_ws(a, sid)
            assert [cell["code"] for cell in state["cells"]] == ["x = 21", "y = x * 2\ny"]
            assert state["cells"][1]["outputs"][-1]["text"] == "42"
        finally:
            a.stop()
            b.stop()


def _answer(events: list[Event]) -> str:
    return "".join(e.data["block"]["text"] for e in events
                   if e.event == "block_stop" and e.data["block"]["type"] == "text")


def _notebook_over_ws(server: Server, sid: str) -> dict[str, Any]:
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
    protocols: Any = ["turnstream", f"turnstream.key.{server.key}"]
    with connect(url, subprotocols=protocols, open_timeout=10) as ws:
        hello = json.loads(ws.recv(timeout=10))
    state: dict[str, Any] = hello["notebook"]
    return state
