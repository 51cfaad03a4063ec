"""An MCP server's progress reaches every stream (issue 27, item 8): turnstream asks for it
(a ``progressToken``) and carries each ``notifications/progress`` as a ``tool_progress`` event:
in the library, on a real server's SSE stream and as the AI SDK's ``data-tool-progress`` part."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from tests.support.server import new_session, run_turn, scenario, server_errors, start_server
from turnstream import Agent
from turnstream.events import ToolProgress
from turnstream.mcp import MCPToolset

ROOT = Path(__file__).resolve().parents[3]
COUNT = {"name": "count", "steps": [
    {"blocks": [{"type": "tool_use", "name": "t__count", "input": {"to": 3}}]},
    {"blocks": [{"type": "text", "text": "{{last}}"}]}]}


async def test_a_servers_progress_notifications_are_tool_progress_events(tmp_path: Path) -> None:
    with (tmp_path / "stderr.log").open("w") as stderr:
        server = MCPToolset.stdio("t", sys.executable, ["-m", "tests.support.mcp_server", "stdio"], cwd=str(ROOT),
                                  timeout=20, stderr=stderr)
        async with Agent(scenario(tmp_path / "count.json", COUNT), tools=[server]) as agent:
            events = [ev async for ev in agent.stream("count")]
    progress = [(ev.progress, ev.total, ev.message) for ev in events if isinstance(ev, ToolProgress)]
    assert progress == [(1.0, 3.0, "counted 1"), (2.0, 3.0, "counted 2"), (3.0, 3.0, "counted 3")]
    assert events[-1].data()["status"] == "complete"


def test_progress_on_the_servers_sse_stream_and_in_the_ai_sdk_stream(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"t": {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio"], "cwd": str(ROOT)}}}))
    srv = start_server(tmp_path, model=scenario(tmp_path / "count.json", COUNT),
                       env={"TURNSTREAM_MCP_CONFIG": str(config)})
    try:
        with srv.client() as c:
            events = run_turn(c, new_session(c, toolset="none"), "count")
            call = next(e.data["tool_use_id"] for e in events if e.event == "block_start" and e.data.get("tool_use_id"))
            assert [(e.data["tool_use_id"], e.data["progress"], e.data["message"]) for e in events
                    if e.event == "tool_progress"] == [(call, 1.0, "counted 1"), (call, 2.0, "counted 2"),
                                                      (call, 3.0, "counted 3")]
            body = {"id": "count-" + uuid.uuid4().hex[:8], "toolset": "none", "messages": [
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "count"}]}]}
            with c.stream("POST", "/api/chat", json=body, headers={"X-AI-SDK-Version": "6"}) as r:
                chunks = [json.loads(line[6:]) for line in r.read().decode().split("\n\n")
                          if line.startswith("data: {")]
        parts = [ch for ch in chunks if ch["type"] == "data-tool-progress"]
        assert [p["data"]["progress"] for p in parts] == [1.0, 2.0, 3.0]
        tool_call = next(ch["toolCallId"] for ch in chunks if ch["type"] == "tool-input-available")
        assert {p["id"] for p in parts} == {tool_call}  # one part per call, replaced as it goes
    finally:
        srv.stop()
    assert server_errors(srv) == []
