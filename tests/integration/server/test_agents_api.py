"""Sessions of several agents over HTTP (docs/agents.md): the ``agents`` of POST /api/sessions,
its refusals by field, a hand-off in a turn, and the agent named on events and blocks; on
SQLite (the module's server) and on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import Server, run_turn, scenario, start_server


@pytest.fixture(scope="module")
def team(models: dict[str, str]) -> list[dict[str, Any]]:
    """Two agents playing scenario files beside the server's own (so the server accepts them)."""
    folder = Path(models["echo"].split(":", 1)[1]).parent
    lead = scenario(folder / "agents-lead.json", {"fragment_size": 5, "turns": [
        [{"blocks": [{"type": "text", "text": "Asking the calculator agent."},
                     {"type": "tool_use", "name": "transfer_to_maths", "input": {}}]}],
        [{"blocks": [{"type": "text", "text": "Lead again."}]}]]})
    maths = scenario(folder / "agents-maths.json", {"fragment_size": 5, "steps": [
        {"blocks": [{"type": "text", "text": "never played"}]},
        {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "6*7"}}]},
        {"blocks": [{"type": "text", "text": "It is {{last}}."},
                    {"type": "tool_use", "name": "transfer_to_lead", "input": {}}]},
        {"blocks": [{"type": "text", "text": "Lead answers next."}]}]})
    return [{"name": "lead", "model": lead, "handoffs": ["maths"], "toolset": "none", "system": "Lead."},
            {"name": "maths", "model": maths, "handoffs": ["lead"], "handoff": "next_turn",
             "toolset": "calculator", "description": "does arithmetic"}]


@pytest.mark.parametrize(("agents", "where"), [
    ([{"name": "a"}, {"name": "a"}], ["body", "agents", 1, "name"]),
    ([{"name": "a", "handoffs": ["b"]}], ["body", "agents", 0, "handoffs", 0]),
    ([{"name": "a", "handoffs": ["a"]}], ["body", "agents", 0, "handoffs", 0]),
    ([{"name": "a", "model": "nope"}], ["body", "agents", 0, "model"]),
    ([{"name": "a b"}], ["body", "agents", 0, "name"]),
    ([{"name": "a", "thinking_budget": 10}], ["body", "agents", 0, "thinking_budget"]),
    ([{"name": "a", "colour": "red"}], ["body", "agents", 0, "colour"]),
    ([], ["body", "agents"]),
])
def test_bad_agents_are_422_naming_the_field(server: Server, agents: list[dict[str, Any]],
                                             where: list[Any]) -> None:
    with server.client() as c:
        r = c.post("/api/sessions", json={"agents": agents})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == where


def run_hand_off(srv: Server, team: list[dict[str, Any]]) -> None:
    with srv.client() as c:
        r = c.post("/api/sessions", json={"title": "team", "agents": team})
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["current_agent"] == "lead" and [a["name"] for a in made["agents"]] == ["lead", "maths"]
        sid = made["id"]
        events = run_turn(c, sid, "what is 6*7?")
        done = events[-1]
        assert done.event == "turn_complete" and done.data["status"] == "complete", events
        assert [e.data.get("agent") for e in events if e.event == "step_start"] == ["lead", "maths", "maths", "maths"]
        stops = [e.data["block"] for e in events if e.event == "block_stop"]
        assert [(b["type"], b["agent"]) for b in stops] == [
            ("text", "lead"), ("tool_use", "lead"), ("tool_result", "lead"),
            ("tool_use", "maths"), ("tool_result", "maths"),
            ("text", "maths"), ("tool_use", "maths"), ("tool_result", "maths"), ("text", "maths")]
        assert stops[4]["content"] == "42"
        assert all(e.data.get("agent") for e in events if e.event == "block_start")
        got = c.get(f"/api/sessions/{sid}").json()
        assert got["current_agent"] == "lead"  # maths handed back for the next turn
        assert [b["agent"] for b in got["turns"][0]["blocks"]] == [b["agent"] for b in stops]
        second = run_turn(c, sid, "thanks")
        assert second[-1].data["status"] == "complete"
        assert {e.data["block"]["agent"] for e in second if e.event == "block_stop"} == {"lead"}
        # a one-model session is unchanged on the wire: no agent anywhere
        plain = c.post("/api/sessions", json={}).json()
        assert "agents" not in plain and "current_agent" not in plain
        events = run_turn(c, plain["id"], "hi")
        assert not any("agent" in e.data for e in events if e.event in ("step_start", "block_start"))
        assert not any("agent" in (e.data.get("block") or {}) for e in events if e.event == "block_stop")


def test_a_hand_off_over_http_names_each_agent(server: Server, team: list[dict[str, Any]]) -> None:
    run_hand_off(server, team)


def test_a_hand_off_on_postgresql(fresh_pg: str, models: dict[str, str], team: list[dict[str, Any]],
                                  tmp_path: Path) -> None:
    srv = start_server(tmp_path, db=fresh_pg, model=models["echo"])
    try:
        run_hand_off(srv, team)
    finally:
        srv.stop()


@pytest.mark.parametrize(("content", "says"), [
    ('[{"name": "a", "handoffs": ["zz"]}]', "0.handoffs.0: no agent named 'zz'"),
    ('[{"name": "a", "model": "nope"}]', "agent 'a':"),
    ("[]", "the list is empty"),
    ("not json", "agents file"),
])
def test_the_server_refuses_to_start_with_a_bad_agents_file(tmp_path: Path, content: str, says: str) -> None:
    bad = tmp_path / "agents.json"
    bad.write_text(content, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "turnstream.cli", "serve", "--port", "0", "--db", "memory://",
                           "--agents", str(bad)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "TURNSTREAM_KEY_FILE": str(tmp_path / "k.key")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
