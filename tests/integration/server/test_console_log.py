"""What ``turnstream serve`` prints (issue 16, point 14): on a terminal, short text lines and no
access log, so the sign-in address stays on screen; elsewhere (a file, a pipe) one JSON object
per line with every request, as log collectors want."""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import httpx2 as httpx
import pexpect
import pytest

from tests.support.server import start_server
from turnstream.server import logs

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_means_text_without_requests_on_a_terminal_and_json_with_them_elsewhere() -> None:
    assert logs.choose("auto", "auto", _Tty()) == logs.LogChoice("text", False, True)
    assert logs.choose("auto", "auto", io.StringIO()) == logs.LogChoice("json", True, False)
    assert logs.choose("json", "auto", _Tty()) == logs.LogChoice("json", False, True)
    assert logs.choose("auto", "on", _Tty()).access is True
    assert logs.choose("text", "off", io.StringIO()) == logs.LogChoice("text", False, False)


def test_on_a_terminal_the_address_stays_in_view(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNSTREAM_", "ANTHROPIC_", "OPENAI_"))}
    env.update(TURNSTREAM_KEY_FILE=str(tmp_path / "k.key"), COLUMNS="200")
    child = pexpect.spawn(sys.executable, ["-m", "turnstream.cli", "serve", "--port", "0", "--db",
                                           f"sqlite:///{tmp_path / 't.db'}"],
                          env=env, cwd=tmp_path, encoding="utf-8", timeout=30, dimensions=(40, 200))
    try:
        child.expect(r"on (http://[^/#\s]+)/#key=(\S+)")
        url, key = child.match.group(1), child.match.group(2)
        child.expect("Ctrl-C stops the server")
        child.expect("TURNSTREAM_ACCESS_LOG=on logs them")
        for _ in range(5):  # requests, a refused one too: none of them prints a line
            assert httpx.get(url + "/healthz").status_code == 200
        assert httpx.get(url + "/api/sessions").status_code == 401
        assert httpx.get(url + "/api/sessions", headers={"Authorization": f"Bearer {key}"}).status_code == 200
        child.sendintr()
        child.expect(pexpect.EOF)
        printed = (child.before or "")
    finally:
        child.close(force=True)
    assert "{" not in printed, f"JSON on a terminal: {printed!r}"
    assert "/healthz" not in printed and "/api/sessions" not in printed
    assert "Started server process" not in printed


def test_elsewhere_every_request_is_a_json_line(tmp_path: Path) -> None:
    srv = start_server(tmp_path)
    try:
        with srv.client() as c:
            assert c.get("/api/sessions").status_code == 200
    finally:
        srv.stop()
    lines = [json.loads(line) for line in srv.log_text().splitlines() if line.strip()]
    hits = [d for d in lines if d["logger"] == "turnstream.access" and d["path"] == "/api/sessions"]
    assert hits and hits[0]["status"] == 200 and re.fullmatch(r"GET /api/sessions 200 [\d.]+ ms", hits[0]["msg"])
