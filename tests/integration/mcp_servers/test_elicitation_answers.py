"""An answer to an MCP server's question is checked against the question's
``requested_schema`` (issue 27, item 5) on a real ``turnstream serve``: a string for an array,
an empty array against ``minItems: 1``, a value outside the ``enum`` and a missing field are
each a 422 naming the field, nothing is stored, and a fitting answer then completes the call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.server import follow_after, new_session, run_turn, scenario, server_errors, start_server

ROOT = Path(__file__).resolve().parents[3]
PAINT = {"name": "paint", "steps": [
    {"blocks": [{"type": "tool_use", "name": "t__paint", "input": {}}]},
    {"blocks": [{"type": "text", "text": "{{last}}"}]}]}


def test_an_answer_that_breaks_the_requested_schema_is_422_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"t": {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio"], "cwd": str(ROOT)}}}))
    srv = start_server(tmp_path, model=scenario(tmp_path / "paint.json", PAINT),
                       env={"TURNSTREAM_MCP_CONFIG": str(config)})
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            events = run_turn(c, sid, "paint")
            req = next(e for e in events if e.event == "tool_request")
            schema = req.data["elicitation"]["requested_schema"]
            assert schema["properties"]["colors"]["minItems"] == 1
            url, call = f"/api/sessions/{sid}/tool-results", req.data["tool_use_id"]
            for answer, loc, words in (
                    ({"colors": "red", "size": "M"}, ["colors"], "is not of type 'array'"),
                    ({"colors": [], "size": "M"}, ["colors"], "should be non-empty"),
                    ({"colors": ["red", "pink"], "size": "M"}, ["colors", 1], "'pink' is not one of"),
                    ({"colors": ["red"], "size": "XL"}, ["size"], "'XL' is not one of"),
                    ({"colors": ["red"]}, ["size"], "'size' is a required property")):
                r = c.post(url, json={"tool_use_id": call, "content": json.dumps(answer)})
                assert r.status_code == 422, (answer, r.text)
                assert r.json()["detail"][0]["loc"] == ["body", "content", *loc], (answer, r.text)
                assert words in r.json()["message"], (answer, r.text)
            fitting = json.dumps({"colors": ["red", "blue"], "size": "M"})
            r = c.post(url, json={"tool_use_id": call, "content": fitting})
            assert r.status_code == 200 and r.json()["resumed"] is True, r.text
            rest = follow_after(c, sid, r.json()["last_event_id"])
            assert rest[-1].data["status"] == "complete"
            results = [e.data["block"] for e in rest
                       if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]
            assert [(b["content"], b["is_error"]) for b in results] == [("red, blue in M", False)]
    finally:
        srv.stop()
    assert server_errors(srv) == []
