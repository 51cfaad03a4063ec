"""The audit trail over HTTP and from the command line, on SQLite and PostgreSQL: each tool
run's times, who approved or denied it and why, "always allow" for the rest of a session,
and the export's redaction. The model is the mock provider (Anthropic's wire), so the deny
reason is checked where it matters: in the next request the model receives."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.paths import REPO
from tests.support.server import Server, new_session, run_turn, server_errors, start_server

PROVIDER_KEY = "sk-ant-api03-provider-secret-0123456789"
REDACT_ENV = '["acct-[0-9]{8}"]'


def note(to: str, text: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": "send_note", "input": {"to": to, "text": text}}


def say(text: str) -> dict[str, Any]:
    return {"blocks": [{"type": "text", "text": text}]}


SCRIPT = {"fragment_size": 7, "turns": [
    # 1: one note, denied with a reason
    [{"blocks": [note("acct-12345678", "token ts_abcdefghijklmnopqrstuv")]}, say("Understood.")],
    # 2: two notes in one step; the first answer allows the tool for the session
    [{"blocks": [note("ann", "a"), note("bob", "b")]}, say("Both sent.")],
    # 3: no one is asked any more
    [{"blocks": [note("cy", "c")]}, say("Sent.")],
]}


@pytest.fixture(params=["sqlite", "postgres"])
def audited(request: pytest.FixtureRequest, tmp_path: Path, mock_provider: MockHandle,
            scenario_name: str) -> Iterator[tuple[Server, str, str]]:
    """A server on each database whose sessions may use the mock provider; returns it, the key
    of the user ``ada`` and the model to use."""
    db = None
    if request.param == "postgres":
        db = request.getfixturevalue("fresh_pg")
    srv = start_server(tmp_path, db=db, env={
        "TURNSTREAM_TOOLS": "tests.support.protocol_tools:TOOLS", "PYTHONPATH": str(REPO),
        "ANTHROPIC_BASE_URL": mock_provider.base_url, "ANTHROPIC_API_KEY": PROVIDER_KEY,
        "TURNSTREAM_AUDIT_REDACT": REDACT_ENV})
    try:
        yield srv, srv.add_user("ada", tmp_path), "anthropic:" + mock_provider.scenario(scenario_name, SCRIPT)
    finally:
        srv.stop()
        assert server_errors(srv) == []


def pending(events: list[Any]) -> list[str]:
    assert events[-1].event == "turn_complete" and events[-1].data["status"] == "awaiting_client"
    return [e.data["tool_use_id"] for e in events if e.event == "tool_request"]


def answer(c: Any, sid: str, tool_use_id: str, **body: Any) -> dict[str, Any]:
    r = c.post(f"/api/sessions/{sid}/tool-results", json={"tool_use_id": tool_use_id, **body})
    assert r.status_code == 200, r.text
    reply: dict[str, Any] = r.json()
    return reply


def finish(c: Any, sid: str, turn_id: str, after: str) -> list[Any]:
    from tests.support.server import sse

    with sse(c, "GET", f"/api/sessions/{sid}/turns/{turn_id}/events", headers={"Last-Event-ID": after}) as s:
        return s.until("turn_complete")


def test_the_audit_trail_over_http_and_the_command_line(audited: tuple[Server, str, str],
                                                        mock_provider: MockHandle) -> None:
    srv, key, model = audited
    with srv.client(key) as c:
        sid = new_session(c, model=model)
        # 1: denied with a reason the user typed
        first = run_turn(c, sid, "write to the account")
        [denied_id] = pending(first)
        t0 = time.time()
        reply = answer(c, sid, denied_id, approved=False, reason="never to acct-12345678, and no tokens")
        assert reply["resumed"] is True
        assert finish(c, sid, reply["turn_id"], reply["last_event_id"])[-1].data["status"] == "complete"
        follow_up = mock_provider.requests(model)[-1]  # the request after the denial
        result = follow_up["messages"][-1]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"] == denied_id and result["is_error"] is True
        text = result["content"] if isinstance(result["content"], str) else result["content"][0]["text"]
        assert text.endswith("The user's reason: never to acct-12345678, and no tokens")

        # 2: two calls waiting; "always" on the first approves the second as well
        second = run_turn(c, sid, "write to ann and bob")
        ann_id, bob_id = pending(second)
        r = c.post(f"/api/sessions/{sid}/tool-results",
                   json={"tool_use_id": ann_id, "approved": False, "always": True})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "always"]
        reply = answer(c, sid, ann_id, approved=True, always=True)
        assert reply["resumed"] is True
        done = finish(c, sid, reply["turn_id"], reply["last_event_id"])
        assert done[-1].data["status"] == "complete"

        # 3: the tool runs without asking
        third = run_turn(c, sid, "write to cy")
        assert third[-1].data["status"] == "complete"
        assert not [e for e in third if e.event == "tool_request"]

        r = c.get(f"/api/sessions/{sid}/audit")
        assert r.status_code == 200, r.text
        audit = r.json()
        # another user's session is not found, nor is a missing one
        with srv.client() as other:
            assert other.get(f"/api/sessions/{sid}/audit").status_code == 404
        assert c.get("/api/sessions/ses_missing/audit").status_code == 404

    runs = audit["tool_runs"]
    assert [(x["tool"], x["input"]["to"]) for x in runs] == [
        ("send_note", "[redacted]"), ("send_note", "ann"), ("send_note", "bob"), ("send_note", "cy")]
    deny, ann, bob, cy = runs
    assert deny["tool_use_id"] == denied_id and deny["input"]["text"] == "token [redacted]"
    assert deny["decision"]["approved"] is False and deny["decision"]["by"] == "ada"
    assert deny["decision"]["source"] == "user" and deny["decision"]["reason"] == "never to [redacted], and no tokens"
    assert t0 <= deny["decision"]["at"] <= time.time()
    assert deny["started_at"] is None and deny["attempts"] == 0 and deny["is_error"] is True
    assert ann["decision"] | {"at": 0} == {"approved": True, "source": "user", "by": "ada", "at": 0, "reason": None,
                                           "always": True}
    assert (ann["tool_use_id"], bob["tool_use_id"]) == (ann_id, bob_id)
    assert bob["decision"]["source"] == "session_grant" and bob["decision"]["by"] == "ada"
    assert cy["decision"]["source"] == "session_grant" and cy["decision"]["approved"] is True
    for run in (ann, bob, cy):
        assert run["is_error"] is False and run["attempts"] == 1 and run["result"].startswith("note to")
        assert run["decision"]["at"] <= run["started_at"] <= run["ended_at"]
        assert run["duration_s"] == pytest.approx(run["ended_at"] - run["started_at"])
    assert [(g["tool"], g["by"]) for g in audit["grants"]] == [("send_note", "ada")]
    body = json.dumps(audit)
    assert PROVIDER_KEY not in body and "acct-12345678" not in body and "ts_abcdefghijklmnopqrstuv" not in body

    # the command line exports the same trail, redacted the same way
    env = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": PROVIDER_KEY, "TURNSTREAM_AUDIT_REDACT": REDACT_ENV}
    out = subprocess.run([sys.executable, "-m", "turnstream.cli", "audit", sid, "--db", srv.db],
                         capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == audit
    lines = subprocess.run([sys.executable, "-m", "turnstream.cli", "audit", sid, "--jsonl", "--db", srv.db],
                           capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    records = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [r["type"] for r in records] == ["grant", "tool_run", "tool_run", "tool_run", "tool_run"]
    assert [r["tool_use_id"] for r in records[1:]] == [x["tool_use_id"] for x in runs]
    assert all(r["session_id"] == sid for r in records)
    missing = subprocess.run([sys.executable, "-m", "turnstream.cli", "audit", "ses_missing", "--db", srv.db],
                             capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert missing.returncode == 1 and "no session ses_missing" in missing.stderr


def test_the_audit_route_is_in_the_openapi_document(audited: tuple[Server, str, str]) -> None:
    srv, key, _ = audited
    with srv.client(key) as c:
        doc = c.get("/openapi.json").json()
    route = doc["paths"]["/api/sessions/{session_id}/audit"]["get"]
    assert "200" in route["responses"] and "404" in route["responses"]
    body = doc["paths"]["/api/sessions/{session_id}/tool-results"]["post"]
    assert "always" in json.dumps(doc["components"]) and body
