"""``POST /api/chat`` (AI SDK UI message stream v1) at the wire level; the AI SDK itself
reads it in ``tests/e2e/aisdk``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx2 as httpx

from tests.support.server import Server


def _chat(c: httpx.Client, body: dict[str, Any]) -> tuple[httpx.Response, list[Any]]:
    with c.stream("POST", "/api/chat", json=body) as r:
        r.read()
    chunks: list[Any] = []
    for block in r.text.split("\n\n"):
        if block.startswith("data: "):
            payload = block[len("data: "):]
            chunks.append(payload if payload == "[DONE]" else json.loads(payload))
    return r, chunks


def _user(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex[:8], "role": "user", "parts": [{"type": "text", "text": text}]}


def test_text_stream_shape(server: Server) -> None:
    cid = "chat-" + uuid.uuid4().hex[:10]
    with server.client() as c:
        r, chunks = _chat(c, {"id": cid, "messages": [_user("hi")], "trigger": "submit-message"})
        assert r.status_code == 200
        assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert r.headers["content-type"].startswith("text/event-stream")
        types = [ch["type"] if isinstance(ch, dict) else ch for ch in chunks]
        assert types[0] == "start"
        assert types[1:3] == ["start-step", "text-start"]
        assert types[-3:] == ["finish-step", "finish", "[DONE]"]
        text = "".join(ch["delta"] for ch in chunks if isinstance(ch, dict) and ch["type"] == "text-delta")
        assert text == "You said: hi"
        assert chunks[-2]["messageMetadata"]["status"] == "complete"
        # The chat id names a session of the caller's, given in the metadata.
        sid = chunks[0]["messageMetadata"]["session_id"]
        session = c.get(f"/api/sessions/{sid}").json()
        assert session["turns"][0]["input"] == "hi"


def test_client_tool_round_trip_in_message_parts(server: Server, models: dict[str, str]) -> None:
    cid = "chat-" + uuid.uuid4().hex[:10]
    body = {"id": cid, "model": models["client"], "toolset": "none",
            "client_tools": [{"name": "get_location", "description": "Where the user is."}]}
    with server.client() as c:
        user = _user("where am I?")
        _, chunks = _chat(c, {**body, "messages": [user]})
        avail = next(ch for ch in chunks if isinstance(ch, dict) and ch["type"] == "tool-input-available")
        assert avail["toolName"] == "get_location"
        assert not any(isinstance(ch, dict) and ch["type"].startswith("tool-output") for ch in chunks)
        assert chunks[-2]["messageMetadata"]["status"] == "awaiting_client"
        mid, sid = chunks[0]["messageId"], chunks[0]["messageMetadata"]["session_id"]
        assistant = {"id": mid, "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-get_location", "toolCallId": avail["toolCallId"], "state": "output-available",
             "input": avail["input"], "output": {"city": "Lyon"}}]}
        # Still waiting: a new user message is refused.
        r, _ = _chat(c, {**body, "messages": [user, _user("hello?")]})
        assert r.status_code == 409
        r, chunks = _chat(c, {**body, "messages": [user, assistant]})
        assert r.status_code == 200
        assert chunks[0] == {"type": "start", "messageId": mid, "messageMetadata": {"session_id": sid}}
        text = "".join(ch["delta"] for ch in chunks if isinstance(ch, dict) and ch["type"] == "text-delta")
        assert text.startswith("You are in {") and '"Lyon"' in text
        # The same answer again finds nothing waiting.
        r, _ = _chat(c, {**body, "messages": [user, assistant]})
        assert r.status_code == 409


def test_chat_errors(server: Server, other_key: str) -> None:
    cid = "chat-" + uuid.uuid4().hex[:10]
    with server.client() as c:
        r = c.post("/api/chat", json={"id": cid, "messages": []})
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.messages:")
        r = c.post("/api/chat", json={"id": "bad id!", "messages": [_user("x")]})
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.id:")
        r = c.post("/api/chat", json={"id": cid, "messages": [{"role": "user", "parts": [{"type": "file"}]}]})
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.messages[0].parts:")
        r = c.post("/api/chat", json={"id": cid, "messages": [{"role": "system", "parts": []}]})
        assert r.status_code == 422
        r = c.post("/api/chat", content=b"{")
        assert r.status_code == 422
        _, chunks = _chat(c, {"id": cid, "messages": [_user("mine")]})
        mine = chunks[0]["messageMetadata"]["session_id"]
    with server.client(other_key) as other:
        # The same chat id is another user's own chat: it neither reaches nor claims the first.
        r, chunks = _chat(other, {"id": cid, "messages": [_user("theirs")]})
        assert r.status_code == 200 and chunks[0]["messageMetadata"]["session_id"] != mine
        assert other.get(f"/api/sessions/{mine}").status_code == 404
    with server.client() as c:
        assert [t["input"] for t in c.get(f"/api/sessions/{mine}").json()["turns"]] == ["mine"]
