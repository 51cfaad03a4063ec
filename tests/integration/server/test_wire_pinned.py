"""The bytes a recorded turn puts on the wire, pinned: SSE, WebSocket and the AI SDK stream.

One scripted conversation goes through a real server: thinking, text, a server tool, a
client tool (the turn pauses, the result is posted), a tool that needs approval (the turn
pauses again, the approval is posted), and a final answer; the AI SDK route plays a shorter
one with a client tool answered in the next request. Every byte the three encoders sent is
compared with ``tests/fixtures/wire/`` after the ids the server makes up (sessions, turns)
are replaced by placeholders. A refactoring of the event code must leave these files as
they are; a deliberate wire change rewrites them with
``python -m tests.integration.server.test_wire_pinned --write`` and shows up in the diff.

Determinism: each follow-up stream is opened before the answer that continues the turn is
posted, so every event (deltas included) reaches it live; tool ids are fixed in the scenario.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.support.server import Server, new_session, scenario, start_server

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "wire"

SESSION_SCENARIO = {"name": "pinned", "fragment_size": 7, "steps": [
    {"blocks": [{"type": "thinking", "thinking": "The user wants a sum and a place.", "signature": "sig-pinned"},
                {"type": "text", "text": "Adding, and asking your browser where you are."},
                {"type": "tool_use", "id": "toolu_pin_1", "name": "calculator", "input": {"expression": "2+3"}},
                {"type": "tool_use", "id": "toolu_pin_2", "name": "get_location", "input": {"precision": "city"}}],
     "usage": {"input_tokens": 31, "output_tokens": 17}},
    {"blocks": [{"type": "tool_use", "id": "toolu_pin_3", "name": "delete_cell", "input": {"cell_id": "cell_gone"}}]},
    {"blocks": [{"type": "text", "text": "Sum {{results[0]}}; you are in {{results[1]}}. Delete: {{last}}"}],
     "usage": {"input_tokens": 55, "output_tokens": 21, "cache_read_input_tokens": 7}}]}

CHAT_SCENARIO = {"name": "pinned-chat", "fragment_size": 9, "steps": [
    {"blocks": [{"type": "thinking", "thinking": "Ask the browser.", "signature": "sig-chat"},
                {"type": "text", "text": "Let me look that up."},
                {"type": "tool_use", "id": "toolu_chat_1", "name": "calculator", "input": {"expression": "6*7"}},
                {"type": "tool_use", "id": "toolu_chat_2", "name": "get_location", "input": {}}]},
    # Slow fragments: the continuation's stream reads the store before the first one, so the
    # text reaches it as deltas (as a client following live sees it).
    {"blocks": [{"type": "text", "text": "{{results[0]}} in {{results[1]}}."}], "delay_ms": 40}]}

LOCATION = {"name": "get_location", "description": "Where the user is.",
            "input_schema": {"type": "object", "properties": {"precision": {"type": "string"}}}}


def _ws_url(server: Server, sid: str) -> str:
    return server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"


def _read_sse(response: Any) -> bytes:
    body = b""
    for chunk in response.iter_raw():
        body += chunk
    return body


def _ws_until_complete(ws: ClientConnection) -> list[str]:
    """WebSocket frames up to the turn's final ``turn_complete`` (status complete)."""
    frames = []
    while True:
        text = ws.recv(timeout=20)
        assert isinstance(text, str)
        frames.append(text)
        msg = json.loads(text)
        if msg.get("event") == "turn_complete" and msg["data"]["status"] == "complete":
            return frames


def record(server: Server, models: dict[str, str]) -> dict[str, bytes]:
    """Play both conversations; return each wire's bytes with made-up ids replaced."""
    out: dict[str, bytes] = {}
    with server.client() as c:
        sid = new_session(c, model=models["pinned"], toolset="notebook")
        protocols: Any = ["turnstream", f"turnstream.key.{server.key}"]
        with connect(_ws_url(server, sid), subprotocols=protocols, open_timeout=10) as ws:
            sse = b""
            with c.stream("POST", f"/api/sessions/{sid}/turns",
                          json={"message": "sum and place", "client_tools": [LOCATION]}) as r:
                assert r.status_code == 200
                turn_id = r.headers["x-turn-id"]
                sse += _read_sse(r)
            last = sse.rsplit(b"\nid: ", 1)[-1].split(b"\n", 1)[0].decode()
            events_url = f"/api/sessions/{sid}/turns/{turn_id}/events"
            with c.stream("GET", events_url, headers={"Last-Event-ID": last}) as r:
                posted = c.post(f"/api/sessions/{sid}/tool-results",
                                json={"tool_use_id": "toolu_pin_2", "content": "Oslo"})
                assert posted.status_code == 200, posted.text
                second = _read_sse(r)
            last = second.rsplit(b"\nid: ", 1)[-1].split(b"\n", 1)[0].decode()
            with c.stream("GET", events_url, headers={"Last-Event-ID": last}) as r:
                posted = c.post(f"/api/sessions/{sid}/tool-results",
                                json={"tool_use_id": "toolu_pin_3", "approved": True})
                assert posted.status_code == 200, posted.text
                third = _read_sse(r)
            with c.stream("GET", events_url) as r:
                replay = _read_sse(r)
            frames = _ws_until_complete(ws)
            hello = json.loads(frames[0])
            hello["notebook"].pop("sandbox", None)  # what isolates kernels differs by machine
            frames[0] = json.dumps(hello, separators=(",", ":"))
        ids = {sid: b"SESSION", turn_id: b"TURN"}
        out["sse_live.txt"] = sse + b"\n--- after the client tool's result ---\n" + second + \
            b"\n--- after the approval ---\n" + third
        out["sse_replay.txt"] = replay
        out["ws.jsonl"] = "\n".join(frames).encode() + b"\n"

        chat_id = "pinned-chat-" + turn_id[:8]
        user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "where am I?"}]}
        body = {"id": chat_id, "messages": [user], "model": models["pinned-chat"], "toolset": "calculator",
                "client_tools": [LOCATION]}
        with c.stream("POST", "/api/chat", json=body) as r:
            assert r.status_code == 200
            chat_turn = r.headers["x-turn-id"]
            first = _read_sse(r)
        assistant = {"id": chat_turn, "role": "assistant", "parts": [
            {"type": "tool-get_location", "toolCallId": "toolu_chat_2", "state": "output-available",
             "input": {}, "output": "Lisbon"}]}
        body["messages"] = [user, assistant]
        with c.stream("POST", "/api/chat", json=body) as r:
            assert r.status_code == 200
            cont = _read_sse(r)
        out["aisdk.txt"] = first + b"\n--- the next request, with the client tool's output ---\n" + cont
        start = json.loads(first.split(b"\n", 1)[0].removeprefix(b"data: "))
        chat_session = start["messageMetadata"]["session_id"]  # the session the caller's chat id names
        ids |= {chat_session: b"CHAT", chat_id: b"CHAT", chat_turn: b"CHATTURN"}
    for name, data in out.items():
        for real, placeholder in ids.items():
            data = data.replace(real.encode(), placeholder)
        out[name] = data
    return out


def _play(tmp: Path) -> dict[str, bytes]:
    models = {d["name"]: scenario(tmp / f"{d['name']}.json", d) for d in (SESSION_SCENARIO, CHAT_SCENARIO)}
    server = start_server(tmp, model=models["pinned"])
    try:
        return record(server, models)
    finally:
        server.stop()


def test_wire_bytes_are_pinned(tmp_path: Path) -> None:
    got = _play(tmp_path)
    for name, data in got.items():
        expected = (FIXTURES / name).read_bytes()
        assert data.decode() == expected.decode(), f"{name} changed"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.integration.server.test_wire_pinned --write")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for name, data in _play(Path(d)).items():
            (FIXTURES / name).write_bytes(data)
            print(f"wrote {FIXTURES / name} ({len(data)} bytes)")
