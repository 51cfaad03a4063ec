"""A turn on a side branch (docs/branches.md) whose server is killed with ``kill -9`` while its
tool runs: the next server takes it over, and it goes on on that branch. Every request the
model then receives reads the side branch's path and nothing of the branch beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.recovery.test_takeover import follow, kill_9, runs, serve, wait_started
from tests.support.mock_provider import MockHandle
from tests.support.server import new_session, run_turn, sse
from turnstream.mock.validate import anthropic_errors


def texts(body: dict[str, Any]) -> list[str]:
    """Every text of an Anthropic request's messages, in order."""
    out = []
    for m in body["messages"]:
        content = m["content"]
        out += [content] if isinstance(content, str) else [p["text"] for p in content if p.get("type") == "text"]
    return out


def test_kill_9_on_a_side_branch_goes_on_on_that_branch(tmp_path: Path, db: str, mock_provider: MockHandle,
                                                         folder: Path, scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {
        "replies": [{"when": {"input": "^charge"}, "steps": [
            {"blocks": [{"type": "tool_use", "name": "charge_once", "input": {"amount": 30}}]},
            {"blocks": [{"type": "text", "text": "Result: {{last}}"}]}]}],
        "steps": [{"blocks": [{"type": "text", "text": "re: {{input}}"}]}]})
    srv = serve(tmp_path, db, mock_provider, folder, TURNSTREAM_MODEL=f"anthropic:{model}")
    with srv.client() as c:
        sid = new_session(c, toolset="none")
        for text in ("one", "two", "three"):
            assert run_turn(c, sid, text)[-1].data["status"] == "complete"
        one = c.get(f"/api/sessions/{sid}").json()["turns"][0]["id"]
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "charge it", "parent_turn_id": one}) as s:
            seen = s.until("block_stop")  # the call
            assert wait_started(folder) == "charge_once"
            kill_9(srv)
    tid = seen[0].data["turn_id"]
    before = len(mock_provider.requests(model))
    srv = serve(tmp_path, db, mock_provider, folder, name="restarted", TURNSTREAM_MODEL=f"anthropic:{model}")
    try:
        rest = follow(srv, sid, tid, seen[-1].id)
        assert rest[-1].data["status"] == "complete"
        assert [r["tool"] for r in runs(folder)] == ["charge_once", "charge_once"]
        after = mock_provider.requests(model)[before:]
        assert after, "the taken-over turn asked the model nothing"
        for body in after:
            assert anthropic_errors(body) is None
            said = texts(body)
            assert said[:3] == ["one", "re: one", "charge it"]
            assert not {"two", "re: two", "three", "re: three"} & set(said)
        with srv.client() as c:
            session = c.get(f"/api/sessions/{sid}").json()
        turn = next(t for t in session["turns"] if t["id"] == tid)
        assert (turn["parent_turn_id"], turn["status"], session["current_leaf"]) == (one, "complete", tid)
    finally:
        srv.stop()
