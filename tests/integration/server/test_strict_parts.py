"""The AI SDK and AG-UI request bodies are as strict as every other (issue 27, item 2): a
message part whose fields have the wrong type (``"text": 5``) is a 422 naming the field, and
starts nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.support.server import Server


def _chat_body(parts: list[dict[str, Any]], role: str = "user") -> dict[str, Any]:
    return {"id": "strict-" + uuid.uuid4().hex[:10], "messages": [{"id": "m1", "role": role, "parts": parts}]}


@pytest.mark.parametrize(("parts", "loc"), [
    ([{"type": "text", "text": 5}], ["text"]),
    ([{"type": "text", "text": "hi"}, {"type": "reasoning", "text": ["x"]}], ["text"]),
    ([{"type": "text"}], []),
    ([{"type": "text", "text": "hi"}, {"type": "file", "mediaType": 7, "url": "data:image/png;base64,AA=="}],
     ["mediaType"]),
    ([{"type": "tool-get", "toolCallId": 12, "state": "output-available", "output": "x"}], ["toolCallId"]),
    ([{"type": "tool-get", "toolCallId": "c1", "state": "approval-responded",
       "approval": {"id": "a", "approved": "yes"}}], ["approval", "approved"]),
    ([{"text": "hi"}], ["type"]),
])
def test_a_chat_part_of_the_wrong_type_is_422_naming_it(server: Server, parts: list[dict[str, Any]],
                                                        loc: list[str]) -> None:
    body = _chat_body(parts)
    with server.client() as c:
        r = c.post("/api/chat", json=body)
        assert r.status_code == 422, r.text
        bad = len(parts) - 1
        assert r.json()["detail"][0]["loc"] == ["body", "messages", 0, "parts", bad, *loc], r.text
        assert c.get(f"/api/chat/{body['id']}/stream").status_code == 204  # no turn, no session


def test_a_chat_with_well_typed_parts_starts_its_turn(server: Server) -> None:
    body = _chat_body([{"type": "step-start"}, {"type": "text", "text": "hi", "state": "done"},
                       {"type": "data-note", "data": {"any": ["thing"]}}])
    with server.client() as c, c.stream("POST", "/api/chat", json=body) as r:
        assert r.status_code == 200
        chunks = [json.loads(line[len("data: "):]) for line in r.read().decode().split("\n\n")
                  if line.startswith("data: {")]
    assert "".join(ch["delta"] for ch in chunks if ch["type"] == "text-delta") == "You said: hi"


@pytest.mark.parametrize(("content", "loc"), [
    ([{"type": "text", "text": 5}], ["content", "parts", 0, "text"]),
    ([{"type": "text"}], ["content", "parts", 0]),
    (5, ["content"]),
])
def test_an_agui_content_part_of_the_wrong_type_is_422_naming_it(server: Server, content: Any,
                                                                  loc: list[Any]) -> None:
    thread = "strict-" + uuid.uuid4().hex[:10]
    run = {"threadId": thread, "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": content}]}
    with server.client() as c:
        r = c.post("/api/ag-ui", json=run)
        assert r.status_code == 422, r.text
        assert [d["loc"] for d in r.json()["detail"]] == [["body", "messages", 0, *loc]], r.text
        assert c.post(f"/api/ag-ui/{thread}/stop").status_code == 404  # no thread was made
