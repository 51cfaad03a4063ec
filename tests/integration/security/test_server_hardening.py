"""A server strangers can share (issue 12, items 4 and 5), tried as an attacker would against a
real ``turnstream serve``: secrets stay out of logs (stdout included) and files stay private,
the page carries a Content-Security-Policy, the WebSocket does not trust a rebinding page's
``Host``, slow headers cannot hold a connection, hostile JSON is a 422 and not a 500, and a
database that cannot be opened is one clear line."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.server import Server, new_session, start_server
from turnstream.server.hardening import CSP

REPO = Path(__file__).resolve().parents[3]
WIDE = 2**70
TOOL = {"name": "get_location", "description": "Where the user is."}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hardening")


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[Server]:
    srv = start_server(workdir, model="scripted:echo", env={"TURNSTREAM_HEADER_TIMEOUT": "0.5"})
    try:
        yield srv
    finally:
        srv.stop()  # fails if a key reached the log


def _ws(server: Server, sid: str, **kw: Any) -> Any:
    url = server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
    protocols: Any = ["turnstream", f"turnstream.key.{server.key}"]
    return connect(url, subprotocols=protocols, open_timeout=10, **kw)


def test_the_database_and_key_file_are_readable_by_their_owner_only(server: Server, workdir: Path) -> None:
    db = Path(server.db.removeprefix("sqlite:///"))
    with server.client() as c:  # a write, so the WAL exists
        assert c.post("/api/sessions", json={}).status_code == 201
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), workdir / "server.key"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_stdout_that_is_no_terminal_gets_the_address_without_the_key(server: Server, workdir: Path) -> None:
    """Under systemd or docker stdout is a log: the line says where the key is, not what it is
    (on a terminal it carries the key: tests/integration/server/test_console_log.py)."""
    [line] = [line for line in server.output if line.startswith("turnstream serving")]
    key_file = workdir / "server.key"
    assert server.key and server.key not in line
    assert f"on {server.url}/ " in line and str(key_file) in line, line
    assert key_file.read_text().strip() == server.key
    with server.client() as c:
        assert c.get("/api/sessions").status_code == 200  # the key from the file signs in


def test_a_key_file_and_database_left_open_to_others_are_made_owner_only(tmp_path: Path) -> None:
    first = start_server(tmp_path, model="scripted:echo")
    with first.client() as c:
        assert c.post("/api/sessions", json={}).status_code == 201
    first.proc.kill()  # so that the -wal and -shm files stay behind, as after a crash
    first.stop()
    db = Path(first.db.removeprefix("sqlite:///"))
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp_path / "server.key"]
    for path in files:
        path.chmod(0o644)  # as an older version, a copy or an umask left them
    second = start_server(tmp_path, model="scripted:echo")
    try:
        assert second.key == first.key  # the same key file, still in use
        assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in files} == {
            path.name: 0o600 for path in files}
        assert "was open to other users (mode 644)" in second.log_text()
    finally:
        second.stop()


def test_key_files_are_ignored_by_git() -> None:
    ignored = subprocess.run(["git", "check-ignore", "-q", "some/where/turnstream.db.key"], cwd=REPO)
    assert ignored.returncode == 0


def test_the_page_has_a_content_security_policy(server: Server) -> None:
    with httpx.Client(base_url=server.url) as c:
        for path in ("/", "/static/app.js"):
            r = c.get(path)
            assert r.status_code == 200
            assert r.headers["content-security-policy"] == CSP
            assert "'unsafe-eval'" not in CSP and "script-src 'self';" in CSP
            assert r.headers["x-frame-options"] == "DENY"
        api = c.get("/healthz")
        assert api.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(("origin", "host", "allowed"), [
    ("http://evil.example:{port}", "evil.example:{port}", False),  # DNS rebinding: the page controls Host too
    ("http://127.0.0.1:1", None, False),  # another local port
    ("http://localhost:{port}", None, True),
    ("http://127.0.0.1:{port}", None, True),
])
def test_the_websocket_origin_is_not_judged_by_the_requests_host(server: Server, origin: str, host: str | None,
                                                                 allowed: bool) -> None:
    port = server.url.rsplit(":", 1)[1]
    with server.client() as c:
        sid = new_session(c)
    headers = {"Host": host.format(port=port)} if host else {}
    kw: dict[str, Any] = {"origin": origin.format(port=port), "additional_headers": headers}
    if allowed:
        with _ws(server, sid, **kw) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
    else:
        with pytest.raises(InvalidStatus) as err:
            _ws(server, sid, **kw)
        assert err.value.response.status_code == 403


def test_a_connection_that_sends_nothing_is_cut_off(server: Server) -> None:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        assert s.recv(1024) == b""  # closed by the server after its 0.5 s (the socket's 10 s bound the wait)


def test_a_request_whose_headers_never_finish_is_cut_off(server: Server) -> None:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        started = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert s.recv(1024) == b""  # closed by the server (the socket's 10 s timeout bounds the wait)
        assert time.monotonic() - started < 8
    with server.client() as c:  # and the server still answers
        assert c.get("/healthz").status_code == 200


@pytest.mark.parametrize(("path", "body", "field"), [
    ("turns", {"message": "hi", "client_tools": [{**TOOL, "input_schema": {
        "type": "object", "properties": {"n": {"type": "integer", "maximum": WIDE}}}}]},
     "body.client_tools[0].input_schema"),
    ("chat", {"id": "wide", "client_tools": [{**TOOL, "input_schema": {"type": "object", "default": -WIDE}}],
              "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
     "body.client_tools[0].input_schema"),
    ("chat", {"id": "wide2", "messages": [{"role": "assistant", "parts": [
        {"type": "tool-get_location", "toolCallId": "t1", "state": "output-available", "output": {"n": WIDE}}]}]},
     "body.messages"),
    ("tool-results", {"tool_use_id": "t1", "approved": "yes"}, "body.approved"),
    ("tool-results", {"tool_use_id": "t1", "content": "x", "is_error": "true"}, "body.is_error"),
    ("turns", {"message": "hi", "client_tools": [{**TOOL, "requires_approval": "yes"}]},
     "body.client_tools[0].requires_approval"),
])
def test_hostile_json_is_a_422_naming_the_field(server: Server, path: str, body: dict[str, Any], field: str) -> None:
    with server.client() as c:
        sid = new_session(c)
        url = "/api/chat" if path == "chat" else f"/api/sessions/{sid}/{path}"
        r = c.post(url, content=json.dumps(body))  # json.dumps writes integers of any size
        assert r.status_code == 422, r.text
        assert r.json()["message"].startswith(field), r.json()["message"]


NO_FILE_OVERRIDE = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                    "--bounding-set=-dac_override,-dac_read_search"]
"""Root reads and writes any file whatever its mode; without these two capabilities its files'
modes hold for it too (as for the server's own user when it is not root)."""


def _existing_database(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "turnstream.cli", "users", "add", "someone", "--db", f"sqlite:///{path}"],
                   check=True, capture_output=True, timeout=60)
    return path


@pytest.mark.parametrize("case", ["a folder", "not a database", "under a file", "read-only", "unreadable",
                                  "in a read-only folder"])
def test_a_database_that_cannot_be_opened_is_one_clear_line(tmp_path: Path, case: str) -> None:
    if case == "a folder":
        target = tmp_path / "db"
        target.mkdir()
    elif case == "not a database":
        target = tmp_path / "junk.db"
        target.write_bytes(b"this is not SQLite " * 100)
    elif case == "under a file":
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "turnstream.db"
    elif case == "read-only":
        target = _existing_database(tmp_path / "ro.db")
        target.chmod(0o400)
    elif case == "unreadable":
        target = _existing_database(tmp_path / "closed.db")
        target.chmod(0o000)
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        target = tmp_path / "ro" / "turnstream.db"
    env = {**os.environ, "TURNSTREAM_KEY_FILE": str(tmp_path / "k.key")}
    prefix = NO_FILE_OVERRIDE if os.geteuid() == 0 else []
    out = subprocess.run([*prefix, sys.executable, "-m", "turnstream.cli", "serve", "--port", "0",
                          "--db", f"sqlite:///{target}"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"turnstream serve: cannot open the SQLite database {target}: "), \
        out.stderr
    assert "Traceback" not in out.stderr
