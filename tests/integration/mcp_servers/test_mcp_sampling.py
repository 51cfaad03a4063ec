"""An MCP server's sampling request (``sampling/createMessage``, issue 27 item 9) through a real
``turnstream serve`` and a real MCP server process over stdio (the test server's ``haiku``
tool, on the protocol versions before 2026-07-28 that carry sampling): answered by the turn's
own model after the user approved it (``ask``, the default), at once (``allow``), or refused
(``deny``); the model call is a sub-step of the turn, in its usage and its budget."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.server import follow_after, mcp_stderr, new_session, run_turn, scenario, server_errors, start_server

ROOT = Path(__file__).resolve().parents[3]
POET = {"name": "poet", "fragment_size": 6,
        "replies": [{"when": {"input": "haiku about (?P<topic>\\w+)"}, "steps": [
            {"blocks": [{"type": "text", "text": "{{match.topic}} on the tin roof"}],
             "usage": {"input_tokens": 11, "output_tokens": 9}}]}],
        "steps": [{"blocks": [{"type": "tool_use", "name": "o__haiku", "input": {"topic": "rain"}}],
                   "usage": {"input_tokens": 20, "output_tokens": 5}},
                  {"blocks": [{"type": "text", "text": "{{last}}"}],
                   "usage": {"input_tokens": 30, "output_tokens": 7}}]}


def _serve(tmp_path: Path, env: dict[str, str]) -> Any:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"o": {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio-2025"], "cwd": str(ROOT)}}}))
    return start_server(tmp_path, model=scenario(tmp_path / "poet.json", POET),
                        env={"TURNSTREAM_MCP_CONFIG": str(config), **env})


def _texts(events: list[Any]) -> list[str]:
    return [e.data["block"]["text"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "text"]


def test_asked_the_user_approves_and_the_turns_model_answers_as_a_metered_sub_step(tmp_path: Path) -> None:
    srv = _serve(tmp_path, {"TURNSTREAM_BUDGET_TURN_TOKENS": "1000000"})
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            events = run_turn(c, sid, "a poem please")
            req = next(e for e in events if e.event == "tool_request")
            assert req.data["name"] == "o__haiku" and events[-1].data["status"] == "awaiting_client"
            asked = req.data["elicitation"]
            assert "'o' asks to use the model (sampling, up to 60 tokens)" in asked["message"]
            assert "Write a haiku about rain." in asked["message"]
            assert asked["requested_schema"] == {"type": "object", "properties": {}}
            r = c.post(f"/api/sessions/{sid}/tool-results",
                       json={"tool_use_id": req.data["tool_use_id"], "content": "{}"})
            assert r.status_code == 200, r.text
            rest = follow_after(c, sid, r.json()["last_event_id"])
            assert rest[-1].data["status"] == "complete"
            assert _texts(rest)[-1].endswith(" wrote: rain on the tin roof")
            sub = [e.data for e in rest if e.event == "usage" and "tool_use_id" in e.data]
            assert [(s["tool_use_id"], s["step"], s["usage"]["input_tokens"], s["usage"]["output_tokens"])
                    for s in sub] == [(req.data["tool_use_id"], 1, 11, 9)]
            # the turn's usage counts the sampling call beside its two steps
            usage = rest[-1].data["usage"]
            assert (usage["input_tokens"], usage["output_tokens"]) == (20 + 11 + 30, 5 + 9 + 7)
            stored = c.get(f"/api/sessions/{sid}").json()["turns"][-1]["usage"]
            assert (stored["input_tokens"], stored["output_tokens"]) == (61, 21)
    finally:
        srv.stop()
    assert server_errors(srv) == []
    lines = mcp_stderr(srv)  # the MCP server says on stderr what it got back
    assert len(lines) == 1 and lines[0][0] == "o", lines
    assert lines[0][1].startswith("haiku: scripted:") and lines[0][1].endswith(" endTurn"), lines


def test_declined_by_the_user_the_server_gets_an_error_and_the_model_is_not_asked(tmp_path: Path) -> None:
    srv = _serve(tmp_path, {})
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            events = run_turn(c, sid, "a poem please")
            req = next(e for e in events if e.event == "tool_request")
            r = c.post(f"/api/sessions/{sid}/tool-results",
                       json={"tool_use_id": req.data["tool_use_id"], "approved": False})
            assert r.status_code == 200, r.text
            rest = follow_after(c, sid, r.json()["last_event_id"])
            assert rest[-1].data["status"] == "complete"
            assert _texts(rest) == ["No haiku: the user declined the request to use the model (decline)"]
            assert not [e for e in rest if e.event == "usage" and "tool_use_id" in e.data]
    finally:
        srv.stop()
    assert server_errors(srv) == []
    assert mcp_stderr(srv) == [("o", "haiku: refused (-1: the user declined the request to use the model (decline))")]


def test_allow_answers_without_a_pause_and_deny_refuses(tmp_path: Path) -> None:
    for mode, text in (("allow", "wrote: rain on the tin roof"),
                       ("deny", "No haiku: sampling is turned off in this turnstream (TURNSTREAM_MCP_SAMPLING=deny)")):
        here = tmp_path / mode
        here.mkdir()
        srv = _serve(here, {"TURNSTREAM_MCP_SAMPLING": mode})
        try:
            with srv.client() as c:
                sid = new_session(c, toolset="none")
                events = run_turn(c, sid, "a poem please")
                assert events[-1].data["status"] == "complete", mode
                assert not [e for e in events if e.event == "tool_request"]
                assert _texts(events)[-1].endswith(text), mode
                subs = [e for e in events if e.event == "usage" and "tool_use_id" in e.data]
                assert len(subs) == (1 if mode == "allow" else 0)
        finally:
            srv.stop()
