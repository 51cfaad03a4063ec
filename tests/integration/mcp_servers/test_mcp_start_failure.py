"""An MCP server that dies at start (issue 27, item 7): it is not started again before every
model request but after a pause, and after a few failures not until the user asks; each change
of its state is told once (the chats show it)."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from turnstream.mcp import MCPToolset
from turnstream.mcp import toolset as toolset_module
from turnstream.tools.server_status import ServerStatus


@pytest.fixture
def log(tmp_path: Path) -> Iterator[TextIO]:
    """Where the dying server's stderr goes."""
    with (tmp_path / "dead.log").open("a") as f:
        yield f


def _dying(count: Path, log: TextIO) -> MCPToolset:
    code = f"open({str(count)!r}, 'a').write('x'); import sys; print('no config', file=sys.stderr); sys.exit(1)"
    return MCPToolset.stdio("dead", sys.executable, ["-c", code], stderr=log)


def _starts(count: Path) -> int:
    return len(count.read_text()) if count.exists() else 0


async def test_a_server_that_dies_at_start_is_tried_again_after_a_pause_then_not_until_asked(
        tmp_path: Path, log: TextIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolset_module, "RETRY_DELAYS", (0.3, 0.3))
    count = tmp_path / "starts"
    server = _dying(count, log)
    told: list[ServerStatus] = []
    server.on_status = told.append
    try:
        for _ in range(10):  # ten model requests in a row
            assert await server.list_tools() == []
        assert _starts(count) == 1
        status = server.status()
        assert status is not None and status.state == "retrying" and status.failures == 1
        assert f"its output is in {tmp_path / 'dead.log'}" in (status.error or "")
        deadline = time.monotonic() + 20
        while server.status() is None or server.status().state != "stopped":  # type: ignore[union-attr]
            assert time.monotonic() < deadline, server.status()
            await server.list_tools()
            await asyncio.sleep(0.05)  # polling, with a deadline: the pause between tries is what is tested
        assert _starts(count) == toolset_module.MAX_FAILURES
        for _ in range(10):
            assert await server.list_tools() == []
        assert _starts(count) == toolset_module.MAX_FAILURES  # stopped: no more starts
        assert [s.state for s in told] == ["retrying", "stopped"]
        assert "not tried again until you ask" in told[-1].line()
        server.retry()
        await server.list_tools()
        assert _starts(count) == toolset_module.MAX_FAILURES + 1
    finally:
        await server.aclose()


async def test_the_terminal_chat_says_it_once_and_mcp_tries_again(tmp_path: Path, log: TextIO) -> None:
    from rich.console import Console

    from turnstream.chat import run_chat

    count = tmp_path / "starts"
    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None)
    stdin = io.StringIO("first\nsecond\nthird\n/mcp\nfourth\n")
    status = await run_chat("scripted:echo", tmp_path, home=tmp_path / "home", extra_tools=[_dying(count, log)],
                            console=console, stdin=stdin)
    shown = out.getvalue()
    assert status == 0, shown
    assert shown.count("⚠ MCP server dead did not start") == 1, shown  # three messages, one word
    assert _starts(count) == 2, shown  # once at the first message, once after /mcp
    assert "it is tried again with your next message" in shown
    assert shown.count("You said:") == 4  # the chat went on without the server's tools


def test_a_server_started_with_a_dying_mcp_server_spawns_it_once_and_says_so_to_the_page(tmp_path: Path) -> None:
    from tests.support.server import new_session, run_turn, server_errors, start_server

    count = tmp_path / "starts"
    code = f"open({str(count)!r}, 'a').write('x'); import sys; sys.exit(1)"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"dead": {"command": sys.executable, "args": ["-c", code]}}}))
    srv = start_server(tmp_path, model="scripted:echo", env={"TURNSTREAM_MCP_CONFIG": str(config)})
    try:
        with srv.client() as c:
            assert c.get("/api/config").json()["mcp_servers"] == []  # not started yet
            sid = new_session(c, toolset="none")
            for message in ("one", "two", "three", "four", "five"):
                assert run_turn(c, sid, message)[-1].data["status"] == "complete"
            [dead] = c.get("/api/config").json()["mcp_servers"]
        assert (dead["name"], dead["state"]) == ("dead", "retrying")
        assert "MCP server dead did not start" in dead["message"]
        # Five turns, one start (two when the turns took longer than the first pause, 2 s).
        assert dead["failures"] == _starts(count) <= 2
    finally:
        srv.stop()
    assert server_errors(srv) == []
