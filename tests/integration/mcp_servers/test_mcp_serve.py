"""``turnstream serve --mcp-config``: MCP tools in a real server's sessions, and an MCP
server's question answered through the tool-results route, also after the server restarted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.server import follow_after, mcp_stderr, new_session, run_turn, scenario, server_errors, start_server

ROOT = Path(__file__).resolve().parents[3]
GREET = {"name": "greet", "fragment_size": 6, "steps": [
    {"blocks": [{"type": "text", "text": "Let me ask."}, {"type": "tool_use", "name": "h__greet", "input": {}}]},
    {"blocks": [{"type": "tool_use", "name": "t__add", "input": {"a": 20, "b": 22}}]},
    {"blocks": [{"type": "text", "text": "{{results[0]}} {{last}}"}]}]}


def write_config(path: Path, http_url: str) -> Path:
    path.write_text(json.dumps({"mcpServers": {
        "t": {"command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio"], "cwd": str(ROOT)},
        "h": {"url": http_url, "headers": {"X-Test": "yes"}, "timeout": 10}}}))
    return path


def test_an_elicitation_is_answered_through_the_api_across_a_server_restart(tmp_path: Path, http_url: str) -> None:
    config = write_config(tmp_path / "mcp.json", http_url)
    model = scenario(tmp_path / "greet.json", GREET)
    env = {"TURNSTREAM_MCP_CONFIG": str(config)}
    srv = start_server(tmp_path, model=model, env=env)
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            events = run_turn(c, sid, "greet me")
            req = next(e for e in events if e.event == "tool_request")
            assert req.data["name"] == "h__greet" and req.data["executor"] == "server"
            assert req.data["elicitation"]["message"] == "What is your name?"
            assert req.data["elicitation"]["requested_schema"]["properties"]["name"]["type"] == "string"
            assert events[-1].data["status"] == "awaiting_client"
            bad = c.post(f"/api/sessions/{sid}/tool-results",
                         json={"tool_use_id": req.data["tool_use_id"], "content": "Ann"})
            assert bad.status_code == 422 and "content" in bad.text
    finally:
        srv.stop()
    assert server_errors(srv) == []
    # a new server process over the same database; the MCP server kept running
    srv = start_server(tmp_path, model=model, env=env)  # the same login key file
    try:
        with srv.client() as c:
            r = c.post(f"/api/sessions/{sid}/tool-results",
                       json={"tool_use_id": req.data["tool_use_id"], "content": json.dumps({"name": "Ann"})})
            assert r.status_code == 200, r.text
            assert r.json()["resumed"] is True
            rest = follow_after(c, sid, r.json()["last_event_id"])
            assert rest[-1].data["status"] == "complete"
            texts = [e.data["block"]["text"] for e in rest
                     if e.event == "block_stop" and e.data["block"]["type"] == "text"]
            assert texts == ["Hello, Ann! 42"]
    finally:
        srv.stop()
    assert server_errors(srv) == []


ASK = {"name": "ask", "fragment_size": 6, "steps": [
    {"blocks": [{"type": "tool_use", "name": "o__ask", "input": {}}]},
    {"blocks": [{"type": "tool_use", "name": "o__ask", "input": {}}]},
    {"blocks": [{"type": "text", "text": "{{results[0]}} {{last}}"}]}]}


def test_a_question_asked_mid_call_by_an_older_server_is_answered_and_declined_through_the_api(
        tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"o": {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio-2025"], "cwd": str(ROOT)}}}))
    srv = start_server(tmp_path, model=scenario(tmp_path / "ask.json", ASK),
                       env={"TURNSTREAM_MCP_CONFIG": str(config)})
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            events = run_turn(c, sid, "greet me")
            for answer, status in ((json.dumps({"name": "Ann"}), "awaiting_client"), (None, "complete")):
                req = next(e for e in reversed(events) if e.event == "tool_request")
                assert req.data["elicitation"]["message"] == "What is your name?"
                assert req.data["elicitation"]["requested_schema"]["required"] == ["name"]
                assert events[-1].data["status"] == "awaiting_client"
                body = {"tool_use_id": req.data["tool_use_id"]}
                body.update({"content": answer} if answer is not None else {"approved": False})
                r = c.post(f"/api/sessions/{sid}/tool-results", json=body)
                assert r.status_code == 200, r.text
                events = follow_after(c, sid, r.json()["last_event_id"])
                assert events[-1].data["status"] == status
    finally:
        srv.stop()
    # the MCP server's stderr (its own lines saying what it got) goes to the server's log, as records
    assert mcp_stderr(srv) == [("o", "ask: accept"), ("o", "ask: decline")]
    assert server_errors(srv) == []
    texts = [e.data["block"]["text"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "text"]
    assert texts == ["Hello, Ann! No name (decline)."]


def test_a_config_that_does_not_fit_stops_the_start_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "mcp.json"
    bad.write_text(json.dumps({"mcpServers": {"t": {"command": "x", "timeout": -1}}}))
    with pytest.raises(RuntimeError) as err:
        start_server(tmp_path, env={"TURNSTREAM_MCP_CONFIG": str(bad)})
    assert "mcpServers.t.timeout" in str(err.value)
