"""Branches over HTTP (docs/branches.md), through the real server and the mock provider in
each wire format: a turn started after an earlier turn (an edit), a regenerated answer, the
branch shown switched; each request the model receives holds its own branch's path and
nothing of another; and the refusals (422 naming the field, 409 while a turn is open, 404
for another user's session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.support.mock_provider import MockHandle
from tests.support.server import Server, new_session, run_turn, server_errors, sse, start_server

APIS = ["anthropic", "openai", "openai-responses"]
SCRIPT = {
    "replies": [{"when": {"input": "^where"}, "steps": [{"blocks": [{"type": "tool_use", "name": "locate",
                                                                      "input": {}}]}]}],
    "steps": [{"blocks": [{"type": "text", "text": "re: {{input}}"}]}]}
LOCATE = {"name": "locate", "description": "Where the user is.", "input_schema": {"type": "object"}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("branches")
    srv = start_server(workdir, env=mock_provider.env())
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


def said(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The user and assistant messages of a request in any of the three wire formats, as
    (role, text)."""
    out = []
    for m in body.get("messages") or body.get("input") or []:
        if m.get("role") not in ("user", "assistant"):
            continue
        content = m.get("content")
        text = content if isinstance(content, str) else " ".join(
            p["text"] for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str))
        out.append((m["role"], text))
    return out


def path(*inputs: str) -> list[tuple[str, str]]:
    """The messages of a turn whose path reads ``inputs[:-1]`` and whose input is the last."""
    out: list[tuple[str, str]] = []
    for text in inputs[:-1]:
        out += [("user", text), ("assistant", f"re: {text}")]
    return [*out, ("user", inputs[-1])]


def session(c: httpx.Client, sid: str) -> dict[str, Any]:
    r = c.get(f"/api/sessions/{sid}")
    assert r.status_code == 200, r.text
    got: dict[str, Any] = r.json()
    return got


def last_turn(c: httpx.Client, sid: str) -> dict[str, Any]:
    turns: list[dict[str, Any]] = session(c, sid)["turns"]
    return turns[-1]


def regenerate(c: httpx.Client, sid: str, turn_id: str) -> list[Any]:
    with sse(c, "POST", f"/api/sessions/{sid}/turns/{turn_id}/regenerate") as s:
        return s.rest()


@pytest.mark.parametrize("api", APIS)
def test_each_branch_is_sent_its_own_path(served: Server, mock_provider: MockHandle, scenario_name: str,
                                          api: str) -> None:
    name = mock_provider.scenario(f"{scenario_name}-{api}", SCRIPT)

    def last_request() -> list[tuple[str, str]]:
        return said(mock_provider.requests(name)[-1])

    with served.client() as c:
        sid = new_session(c, model=f"{api}:{name}")
        assert session(c, sid)["current_leaf"] is None
        ids = []
        for text in ("one", "two", "three"):
            assert run_turn(c, sid, text)[-1].data["status"] == "complete"
            ids.append(last_turn(c, sid)["id"])
        one, two, three = ids
        # an edit of "two", and a turn after it
        run_turn(c, sid, "two, edited", parent_turn_id=one)
        assert last_request() == path("one", "two, edited")
        edited = last_turn(c, sid)
        assert (edited["parent_turn_id"], session(c, sid)["current_leaf"]) == (one, edited["id"])
        run_turn(c, sid, "three on b")
        assert last_request() == path("one", "two, edited", "three on b")
        # another answer to "two", and a turn after it
        events = regenerate(c, sid, two)
        assert events[-1].event == "turn_complete" and events[-1].data["status"] == "complete"
        again = last_turn(c, sid)
        assert (again["parent_turn_id"], again["input"]) == (one, "two")
        assert last_request() == path("one", "two")
        run_turn(c, sid, "three on c")
        assert last_request() == path("one", "two", "three on c")
        # a new first message (parent null)
        run_turn(c, sid, "one, edited", parent_turn_id=None)
        assert last_turn(c, sid)["parent_turn_id"] is None
        assert last_request() == path("one, edited")
        # back to the first branch: the next turn follows "three"
        r = c.put(f"/api/sessions/{sid}/current", json={"turn_id": three})
        assert r.status_code == 200, r.text
        assert r.json()["current_leaf"] == three and r.json()["id"] == sid
        assert session(c, sid)["current_leaf"] == three
        run_turn(c, sid, "four")
        assert last_request() == path("one", "two", "three", "four")
        turns = session(c, sid)["turns"]
        assert [t["parent_turn_id"] for t in turns][:3] == [None, one, two]
        assert len(turns) == 9 and turns[-1]["parent_turn_id"] == three


def test_refusals_name_the_field_and_an_open_turn_blocks_every_branch(
        served: Server, mock_provider: MockHandle, scenario_name: str, tmp_path: Path) -> None:
    name = mock_provider.scenario(scenario_name, SCRIPT)
    stranger = served.add_user("stranger", tmp_path)
    with served.client() as c, served.client(stranger) as other:
        sid = new_session(c, model=f"anthropic:{name}")
        elsewhere = new_session(c, model=f"anthropic:{name}")
        run_turn(c, sid, "one")
        one = last_turn(c, sid)["id"]
        run_turn(c, elsewhere, "there")
        there = last_turn(c, elsewhere)["id"]
        for parent in (there, "turn_missing"):
            r = c.post(f"/api/sessions/{sid}/turns", json={"message": "x", "parent_turn_id": parent})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "parent_turn_id"], r.text
        r = c.put(f"/api/sessions/{sid}/current", json={"turn_id": there})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "turn_id"], r.text
        assert c.put(f"/api/sessions/{sid}/current", json={}).status_code == 422
        assert c.post(f"/api/sessions/{sid}/turns/{there}/regenerate").status_code == 404
        assert other.put(f"/api/sessions/{sid}/current", json={"turn_id": one}).status_code == 404
        assert other.post(f"/api/sessions/{sid}/turns/{one}/regenerate").status_code == 404
        assert other.get(f"/api/sessions/{sid}").status_code == 404
        assert c.put("/api/sessions/ses_missing/current", json={"turn_id": one}).status_code == 404
        assert session(c, sid)["current_leaf"] == one and len(session(c, sid)["turns"]) == 1
        # a turn waiting for a client tool is open: no branch may start until it ends
        waiting = run_turn(c, sid, "where am I", client_tools=[LOCATE])
        assert waiting[-1].data["status"] == "awaiting_client"
        open_id = last_turn(c, sid)["id"]
        r = c.post(f"/api/sessions/{sid}/turns", json={"message": "x", "parent_turn_id": one})
        assert r.status_code == 409 and open_id in r.text, r.text
        assert c.post(f"/api/sessions/{sid}/turns/{one}/regenerate").status_code == 409
        r = c.put(f"/api/sessions/{sid}/current", json={"turn_id": one})  # switching what is shown is allowed
        assert r.status_code == 200 and r.json()["current_leaf"] == one
        assert c.post(f"/api/sessions/{sid}/turns/{open_id}/cancel").status_code == 200
        run_turn(c, sid, "after")
        assert last_turn(c, sid)["parent_turn_id"] == one
