"""A real ``turnstream serve`` (SQLite) whose models are ``turnstream mock-provider`` in each
wire format: images and PDFs on the turn-start route with their limits, and messages sent
while the session's turn waits on an approval (the calls are denied with the message as the
reason, and the turn goes on) or runs (queued, read by the model at the next step). The
running turn is held in a tool until the test opens a gate: nothing is timed. The same
through ``/api/chat``: AI SDK ``file`` parts, and a chat message that steers the open turn."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.media import PDF, PNG
from tests.support.mock_provider import MockHandle
from tests.support.server import Event, Server, new_session, run_turn, server_errors, sse, start_server
from tests.support.ui_stream import chunks, gated_server, open_gate, read_until
from tests.support.ui_stream import user as ui_user

PREFIXES = ("anthropic", "openai", "openai-responses")
_names = itertools.count()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[tuple[Server, Path]]:
    tmp = tmp_path_factory.mktemp("steering")
    with gated_server(tmp, "scripted:echo", {
            **mock_provider.env(), "TURNSTREAM_ATTACHMENT_MB": "0.001", "TURNSTREAM_MAX_ATTACHMENTS": "2"}) as served:
        yield served


def model(mock: MockHandle, prefix: str, steps: list[dict[str, Any]]) -> str:
    return f"{prefix}:" + mock.scenario(f"steer-{prefix}-{next(_names)}", {"steering": True, "steps": steps})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def follow(c: Any, sid: str, turn_id: str, after: int) -> list[Event]:
    with sse(c, "GET", f"/api/sessions/{sid}/turns/{turn_id}/events",
             headers={"Last-Event-ID": f"{turn_id}:{after}"}) as s:
        return s.rest()


def deny_by_message(srv: Server, m: str, message: dict[str, Any]) -> list[Event]:
    """Start a turn of ``m`` that waits for the approval of its call, then post ``message`` (a turn's
    body): the route says it denied that turn's call, and the turn goes on to ``complete``. Returns
    the turn's events after the pause."""
    with srv.client() as c:
        sid = new_session(c, model=m, toolset="none")
        paused = run_turn(c, sid, "send ada a note")
        assert paused[-1].data["status"] == "awaiting_client"
        tid = paused[-1].data["turn_id"]
        r = c.post(f"/api/sessions/{sid}/turns", json=message)
        assert r.status_code == 202, r.text
        assert r.json()["outcome"] == "denied" and r.json()["turn_id"] == tid
        rest = follow(c, sid, tid, paused[-1].n)
        assert rest[-1].data["status"] == "complete"
    return rest


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_message_during_an_approval_denies_it_and_the_turn_goes_on(
        served: tuple[Server, Path], mock_provider: MockHandle, prefix: str) -> None:
    srv, _ = served
    m = model(mock_provider, prefix, [
        {"blocks": [{"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
        {"blocks": [{"type": "text", "text": "Understood."}]}])
    deny_by_message(srv, m, {"message": "no, not to ada; ask me first"})
    last = json.dumps(mock_provider.requests(m)[-1])
    assert "no, not to ada; ask me first" in last  # the denial's reason reached the provider


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_message_while_the_turn_runs_reaches_its_next_step(
        served: tuple[Server, Path], mock_provider: MockHandle, prefix: str) -> None:
    srv, gate = served
    m = model(mock_provider, prefix, [
        {"blocks": [{"type": "tool_use", "name": "wait_for_gate", "input": {}}]},
        {"blocks": [{"type": "text", "text": "Noted."}]}])
    with srv.client() as c, srv.client() as other:
        sid = new_session(c, model=m, toolset="none")
        with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "wait at the gate"}) as s:
            for ev in s:
                if ev.event == "block_stop" and ev.data["block"]["type"] == "tool_use":
                    break
            r = other.post(f"/api/sessions/{sid}/turns", json={
                "message": "also look at this", "parts": [{"type": "image", "media_type": "image/png",
                                                           "data": b64(PNG)}]})
            assert r.status_code == 202, r.text
            assert r.json()["outcome"] == "queued"
            open_gate(gate)
            rest = s.rest()
        assert rest[-1].data["status"] == "complete"
        users = [e.data["block"] for e in rest if e.event == "block_stop" and e.data["block"]["type"] == "user"]
        assert [u["text"] for u in users] == ["also look at this"]
    first, second = mock_provider.requests(m)[-2:]
    assert "also look at this" not in json.dumps(first)
    assert "also look at this" in json.dumps(second) and b64(PNG) in json.dumps(second)


def test_parts_on_the_turn_route_and_their_limits(served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    srv, _ = served
    m = model(mock_provider, "anthropic", [{"blocks": [{"type": "text", "text": "Seen."}]}])
    png, pdf = {"type": "image", "media_type": "image/png", "data": b64(PNG)}, \
        {"type": "file", "media_type": "application/pdf", "data": b64(PDF), "name": "page.pdf"}
    with srv.client() as c:
        sid = new_session(c, model=m, toolset="none")
        events = run_turn(c, sid, "look", parts=[png, pdf])
        assert events[-1].data["status"] == "complete"
        user = next(e.data["block"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "user")
        assert [a["media_type"] for a in user["attachments"]] == ["image/png", "application/pdf"]
        assert b64(PDF) in json.dumps(mock_provider.requests(m)[-1])

        def refused(parts: list[dict[str, Any]]) -> tuple[int, Any]:
            r = c.post(f"/api/sessions/{sid}/turns", json={"message": "x", "parts": parts})
            return r.status_code, r.json()

        status, body = refused([{**png, "media_type": "image/tiff"}])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "parts", 0, "media_type"]
        status, body = refused([png, {**pdf, "data": b64(PNG)}])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "parts", 1, "data"]
        status, body = refused([{**png, "data": "not base64!"}])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "parts", 0, "data"]
        status, body = refused([{**png, "data": b64(PNG + bytes(2000))}])
        assert status == 413 and "parts.0.data" in body["message"]
        status, body = refused([png, png, png])
        assert status == 413


def test_a_sessions_blobs_are_served_to_its_owner_only(served: tuple[Server, Path], mock_provider: MockHandle,
                                                        tmp_path: Path) -> None:
    srv, _ = served
    m = model(mock_provider, "anthropic", [{"blocks": [{"type": "text", "text": "Seen."}]}])
    bob = srv.add_user("bob-blobs", tmp_path)
    with srv.client() as c, srv.client(bob) as other:
        sid = new_session(c, model=m, toolset="none")
        events = run_turn(c, sid, "look", parts=[{"type": "image", "media_type": "image/png", "data": b64(PNG)}])
        user = next(e.data["block"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == "user")
        sha = user["attachments"][0]["sha256"]
        r = c.get(f"/api/sessions/{sid}/blobs/{sha}")
        assert r.status_code == 200 and r.content == PNG and r.headers["content-type"] == "image/png"
        # Another session of the same user refers to no such blob; another user sees no session.
        empty = new_session(c, model=m, toolset="none")
        assert c.get(f"/api/sessions/{empty}/blobs/{sha}").status_code == 404
        assert other.get(f"/api/sessions/{sid}/blobs/{sha}").status_code == 404
        assert c.get(f"/api/sessions/{sid}/blobs/{'0' * 64}").status_code == 404
        assert c.get(f"/api/sessions/{sid}/blobs/not-a-hash").status_code == 404


# --- the same through /api/chat (AI SDK UI messages) ------------------------------------------------------------


def chat_post(c: Any, body: dict[str, Any]) -> tuple[int, Any]:
    """A whole /api/chat answer: the status and its chunks (or the refusal's JSON)."""
    with c.stream("POST", "/api/chat", json=body) as r:
        r.read()
    return r.status_code, chunks(r.text) if r.status_code == 200 else r.json()


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{b64(data)}"


def test_file_parts_on_the_chat_route_and_their_limits(served: tuple[Server, Path],
                                                        mock_provider: MockHandle) -> None:
    srv, _ = served
    m = model(mock_provider, "openai", [{"blocks": [{"type": "text", "text": "Seen."}]}])
    png = {"type": "file", "mediaType": "image/png", "url": data_url("image/png", PNG), "filename": "dot.png"}
    pdf = {"type": "file", "mediaType": "application/pdf", "url": data_url("application/pdf", PDF)}

    def message(*parts: dict[str, Any]) -> dict[str, Any]:
        return {**ui_user("what is in these?"), "parts": [{"type": "text", "text": "what is in these?"}, *parts]}

    with srv.client() as c:
        cid = f"files-{next(_names)}"
        status, out = chat_post(c, {"id": cid, "model": m, "toolset": "none", "messages": [message(png, pdf)]})
        assert status == 200 and out[-2]["messageMetadata"]["status"] == "complete"
        sent = json.dumps(mock_provider.requests(m)[-1])
        assert b64(PNG) in sent and b64(PDF) in sent  # image_url and file parts, as Chat Completions takes them
        sid = out[0]["messageMetadata"]["session_id"]
        turn = c.get(f"/api/sessions/{sid}").json()["turns"][0]
        user_block = next(b for b in turn["blocks"] if b["type"] == "user")
        assert [(a["media_type"], a.get("name")) for a in user_block["attachments"]] == [
            ("image/png", "dot.png"), ("application/pdf", None)]

        def refused(*parts: dict[str, Any]) -> tuple[int, Any]:
            return chat_post(c, {"id": f"files-{next(_names)}", "model": m, "toolset": "none",
                                 "messages": [message(*parts)]})

        where = ["body", "messages", 0, "parts"]
        status, body = refused(png, {**pdf, "mediaType": "image/tiff"})
        assert status == 422 and body["detail"][0]["loc"] == [*where, 2, "mediaType"]
        status, body = refused({**png, "url": "https://example.com/dot.png"})
        assert status == 422 and body["detail"][0]["loc"] == [*where, 1, "url"]
        status, body = refused({**png, "url": "data:image/png;base64,not base64!"})
        assert status == 422 and body["detail"][0]["loc"] == [*where, 1, "url"]
        status, body = refused({**pdf, "url": data_url("application/pdf", PNG)})
        assert status == 422 and body["detail"][0]["loc"] == [*where, 1, "url"]
        status, body = refused({**png, "mediaType": None})
        assert status == 422 and body["detail"][0]["loc"] == [*where, 1, "mediaType"]
        status, body = refused({**png, "url": data_url("image/png", PNG + bytes(2000))})
        assert status == 413 and "messages.0.parts.1.url" in body["message"]
        status, body = refused(png, png, png)
        assert status == 413


def test_a_chat_message_during_an_approval_denies_it_and_streams_the_turn_going_on(
        served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    srv, _ = served
    m = model(mock_provider, "anthropic", [
        {"blocks": [{"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
        {"blocks": [{"type": "text", "text": "Understood."}]}])
    cid = f"deny-{next(_names)}"
    with srv.client() as c:
        first = ui_user("send ada a note")
        status, out = chat_post(c, {"id": cid, "model": m, "toolset": "none", "messages": [first]})
        assert out[-2]["messageMetadata"]["status"] == "awaiting_client"
        assistant = {"id": out[0]["messageId"], "role": "assistant", "parts": []}
        status, out = chat_post(c, {"id": cid, "messages": [first, assistant, ui_user("no, ask me first")]})
        assert status == 200, out
        steering = out[0]
        assert steering["type"] == "data-turnstream-steering" and steering["transient"] is True
        assert steering["data"]["outcome"] == "denied" and len(steering["data"]["tool_use_ids"]) == 1
        assert out[1]["type"] == "start" and "messageId" not in out[1]  # a new message: the client names it
        text = "".join(ch["delta"] for ch in out if isinstance(ch, dict) and ch["type"] == "text-delta")
        assert text == "Understood."
        assert not any(isinstance(ch, dict) and ch["type"].startswith("tool-") for ch in out)
        assert out[-2]["messageMetadata"]["status"] == "complete" and out[-1] == "[DONE]"
    assert "no, ask me first" in json.dumps(mock_provider.requests(m)[-1])


def test_a_chat_message_while_the_turn_runs_is_queued_for_its_next_step(
        served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    srv, gate = served
    m = model(mock_provider, "openai-responses", [
        {"blocks": [{"type": "tool_use", "name": "wait_for_gate", "input": {}}]},
        {"blocks": [{"type": "text", "text": "Noted."}]}])
    cid = f"queue-{next(_names)}"
    first = ui_user("wait at the gate")
    with srv.client() as c, srv.client() as other:
        with c.stream("POST", "/api/chat", json={"id": cid, "model": m, "toolset": "none",
                                                 "messages": [first]}) as running:
            lines = running.iter_lines()
            read_until(lines, "tool-input-available")
            late = {**ui_user("also this picture"), "parts": [
                {"type": "text", "text": "also this picture"},
                {"type": "file", "mediaType": "image/png", "url": data_url("image/png", PNG)}]}
            status, out = chat_post(other, {"id": cid, "messages": [first, late]})
            assert status == 200, out
            assert [ch["type"] if isinstance(ch, dict) else ch for ch in out] == [
                "data-turnstream-steering", "[DONE]"]
            assert out[0]["data"]["outcome"] == "queued"
            open_gate(gate)
            rest = chunks("\n\n".join(lines))
        text = "".join(ch["delta"] for ch in rest if isinstance(ch, dict) and ch["type"] == "text-delta")
        assert text == "Noted." and rest[-2]["messageMetadata"]["status"] == "complete"
    first_req, second_req = mock_provider.requests(m)[-2:]
    assert "also this picture" not in json.dumps(first_req)
    assert "also this picture" in json.dumps(second_req) and b64(PNG) in json.dumps(second_req)


# --- multipart on the turn route --------------------------------------------------------------------------------


def test_a_multipart_turn_with_files_and_its_limits(served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    srv, _ = served
    m = model(mock_provider, "openai-responses", [{"blocks": [{"type": "text", "text": "Seen."}]}])
    with srv.client() as c:
        sid = new_session(c, model=m, toolset="none")
        url = f"/api/sessions/{sid}/turns"
        # The PDF comes without a type (curl -F without ;type=): its bytes say what it is.
        with sse(c, "POST", url, data={"message": "what is in these?"},
                 files=[("files", ("dot.png", PNG, "image/png")),
                        ("files", ("page.pdf", PDF, "application/octet-stream"))]) as s:
            events = s.rest()
        assert events[-1].data["status"] == "complete"
        user_block = next(e.data["block"] for e in events
                          if e.event == "block_stop" and e.data["block"]["type"] == "user")
        assert [(a["media_type"], a.get("name")) for a in user_block["attachments"]] == [
            ("image/png", "dot.png"), ("application/pdf", "page.pdf")]
        sent = json.dumps(mock_provider.requests(m)[-1])
        assert "what is in these?" in sent and b64(PNG) in sent and b64(PDF) in sent

        def refused(data: dict[str, str], files: list[tuple[str, Any]]) -> tuple[int, Any]:
            r = c.post(url, data=data, files=files)
            return r.status_code, r.json()

        status, body = refused({"message": "x"}, [("files", ("a.tif", b"II*\x00", "image/tiff"))])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "files", 0, "content_type"]
        status, body = refused({"message": "x"}, [("files", ("dot.png", PNG, "image/png")),
                                                  ("files", ("fake.pdf", PNG, "application/pdf"))])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "files", 1, "content"]
        status, body = refused({"message": "x"}, [("files", ("big.png", PNG + bytes(2000), "image/png"))])
        assert status == 413 and "files.0.content" in body["message"]
        status, body = refused({"message": "x"}, [("files", ("dot.png", PNG, "image/png"))] * 3)
        assert status == 413
        status, body = refused({}, [("files", ("dot.png", PNG, "image/png"))])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "message"]
        status, body = refused({"message": "x", "model": "other"}, [("files", ("dot.png", PNG, "image/png"))])
        assert status == 422 and body["detail"][0]["loc"] == ["body", "model"]
        status, body = refused({"message": "x", "files": "not a file"}, [("files", ("dot.png", PNG, "image/png"))])
        assert status == 422 and body["detail"][0]["loc"][:2] == ["body", "files"]
        r = c.post(url, content=b"--nope\r\nbroken", headers={"content-type": "multipart/form-data; boundary=x"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"], r.text
        assert len(mock_provider.requests(m)) == 1  # nothing refused reached the provider


def test_the_turn_route_lists_json_and_multipart_in_openapi(served: tuple[Server, Path]) -> None:
    srv, _ = served
    with srv.client() as c:
        spec = c.get("/openapi.json").json()
    content = spec["paths"]["/api/sessions/{session_id}/turns"]["post"]["requestBody"]["content"]
    assert set(content) == {"application/json", "multipart/form-data"}
    form = content["multipart/form-data"]["schema"]
    assert form["required"] == ["message"] and form["properties"]["files"]["items"]["format"] == "binary"


# --- what a message does to a turn that waits, and what becomes of queued messages ------------------------------


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_message_with_an_image_during_an_approval_denies_it_and_carries_the_image_on(
        served: tuple[Server, Path], mock_provider: MockHandle, prefix: str) -> None:
    srv, _ = served
    m = model(mock_provider, prefix, [
        {"blocks": [{"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
        {"blocks": [{"type": "text", "text": "I see the picture."}]}])
    rest = deny_by_message(srv, m, {"message": "no: send her this picture instead",
                                    "parts": [{"type": "image", "media_type": "image/png", "data": b64(PNG)}]})
    stops = [e.data["block"] for e in rest if e.event == "block_stop"]
    assert [b["type"] for b in stops] == ["tool_result", "user", "text"]
    assert "send her this picture instead" in stops[0]["content"] and stops[0]["is_error"]
    assert [a["media_type"] for a in stops[1]["attachments"]] == ["image/png"] and stops[1]["step"] == 1
    last = json.dumps(mock_provider.requests(m)[-1])  # accepted by the format's own rules
    assert "send her this picture instead" in last and b64(PNG) in last


def test_a_message_while_a_client_tool_waits_is_refused_saying_what_the_turn_waits_for(
        served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    srv, _ = served
    m = model(mock_provider, "anthropic", [
        {"blocks": [{"type": "tool_use", "name": "get_location", "input": {}}]},
        {"blocks": [{"type": "text", "text": "Found you."}]}])
    with srv.client() as c:
        sid = new_session(c, model=m, toolset="none")
        paused = run_turn(c, sid, "where am I?", client_tools=[LOCATION])
        assert paused[-1].data["status"] == "awaiting_client"
        r = c.post(f"/api/sessions/{sid}/turns", json={"message": "hello?"})
        assert r.status_code == 409, r.text
        assert r.json()["message"] == (f"turn {paused[-1].data['turn_id']} waits for the result of client tool "
                                       "get_location; answer it or cancel the turn before sending a message")


LOCATION = {"name": "get_location", "description": "Where the user is.",
            "input_schema": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[Server]:
    """A server with a 100-token ceiling per turn."""
    tmp = tmp_path_factory.mktemp("steering-budget")
    srv = start_server(tmp, model="scripted:echo", env={
        "ANTHROPIC_BASE_URL": mock_provider.base_url, "ANTHROPIC_API_KEY": "test-key",
        "TURNSTREAM_BUDGET_TURN_TOKENS": "100"})
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


def test_a_message_during_a_budget_question_declines_going_on_with_the_words_as_the_reason(
        budgeted: Server, mock_provider: MockHandle) -> None:
    m = model(mock_provider, "anthropic", [
        {"blocks": [{"type": "tool_use", "name": "get_location", "input": {}}],
         "usage": {"input_tokens": 100, "output_tokens": 20}},
        {"blocks": [{"type": "text", "text": "Stopping here."}]}])
    with budgeted.client() as c:
        sid = new_session(c, model=m, toolset="none")
        paused = run_turn(c, sid, "where am I?", client_tools=[LOCATION])
        (asked,) = [e for e in paused if e.event == "tool_request"]
        assert asked.data["budget"]["scope"] == "turn" and paused[-1].data["status"] == "awaiting_client"
        tid = paused[-1].data["turn_id"]
        r = c.post(f"/api/sessions/{sid}/turns", json={"message": "enough, just tell me what you know"})
        assert r.status_code == 202, r.text  # the budget's question is a yes or no one: this is a no
        assert r.json()["outcome"] == "denied"
        rest = follow(c, sid, tid, paused[-1].n)
        assert rest[-1].data["status"] == "complete" and rest[-1].data["stop_reason"] == "budget"
    last = mock_provider.requests(m)[-1]
    assert "enough, just tell me what you know" in json.dumps(last) and last["tool_choice"] == {"type": "none"}


def ws_tab(srv: Server, sid: str) -> Any:
    from websockets.sync.client import connect

    url = srv.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
    return connect(url, subprotocols=["turnstream", f"turnstream.key.{srv.key}"], open_timeout=10)  # type: ignore[list-item]


def turn_ends(ws: Any, count: int) -> list[dict[str, Any]]:
    """The session's next ``count`` turn ends on its WebSocket (a pause for the client is none)."""
    ends: list[dict[str, Any]] = []
    while len(ends) < count:
        msg = json.loads(ws.recv(timeout=20))
        ended = msg.get("type") == "event" and msg["event"] == "turn_complete"
        if ended and msg["data"]["status"] != "awaiting_client":
            ends.append(msg["data"])
    return ends


def test_a_message_queued_before_a_pause_starts_the_next_turn_when_the_waiting_turn_is_cancelled(
        served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    """It does not wait in the store for a later turn to read it as if sent there."""
    srv, gate = served
    m = "anthropic:" + mock_provider.scenario(f"steer-cancel-{next(_names)}", {"turns": [
        [{"blocks": [{"type": "tool_use", "name": "wait_for_gate", "input": {}},
                     {"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]}],
        [{"blocks": [{"type": "text", "text": "Next: {{input}}"}]}]]})
    with srv.client() as c, srv.client() as other:
        sid = new_session(c, model=m, toolset="none")
        with ws_tab(srv, sid) as ws:
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "note and wait"}) as s:
                tid = next(iter(s)).data["turn_id"]
                for ev in s:
                    if ev.event == "block_stop" and ev.data["block"]["type"] == "tool_use":
                        break
                r = other.post(f"/api/sessions/{sid}/turns", json={"message": "and say hello"})
                assert r.json()["outcome"] == "queued", r.text
                open_gate(gate)
                assert s.rest()[-1].data["status"] == "awaiting_client"  # no step read the message
            r = c.post(f"/api/sessions/{sid}/turns/{tid}/cancel")
            assert r.status_code == 200, r.text
            cancelled, started = turn_ends(ws, 2)
        assert cancelled["turn_id"] == tid and cancelled["status"] == "cancelled"
        assert started["status"] == "complete"
        turns = c.get(f"/api/sessions/{sid}").json()["turns"]
    assert [(t["input"], t["status"]) for t in turns] == [("note and wait", "cancelled"),
                                                          ("and say hello", "complete")]
    assert not [b for b in turns[0]["blocks"] if b["type"] == "user"]
    assert "Next: and say hello" in json.dumps(turns[1]["blocks"])


@pytest.fixture(scope="module")
def next_turn_served(tmp_path_factory: pytest.TempPathFactory,
                     mock_provider: MockHandle) -> Iterator[tuple[Server, Path]]:
    """A server with ``TURNSTREAM_QUEUED_MESSAGES=next_turn``."""
    tmp = tmp_path_factory.mktemp("steering-next-turn")
    env = {**mock_provider.env(), "TURNSTREAM_QUEUED_MESSAGES": "next_turn"}
    with gated_server(tmp, "scripted:echo", env) as served:
        yield served


def test_with_next_turn_a_message_while_the_turn_runs_starts_the_next_turn(
        next_turn_served: tuple[Server, Path], mock_provider: MockHandle) -> None:
    srv, gate = next_turn_served
    m = "anthropic:" + mock_provider.scenario(f"steer-next-{next(_names)}", {"turns": [
        [{"blocks": [{"type": "tool_use", "name": "wait_for_gate", "input": {}}]},
         {"blocks": [{"type": "text", "text": "Gate passed."}]}],
        [{"blocks": [{"type": "text", "text": "Next: {{input}}"}]}]]})
    with srv.client() as c, srv.client() as other:
        sid = new_session(c, model=m, toolset="none")
        with ws_tab(srv, sid) as ws:
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "wait at the gate"}) as s:
                tid = next(iter(s)).data["turn_id"]
                for ev in s:
                    if ev.event == "block_stop" and ev.data["block"]["type"] == "tool_use":
                        break
                r = other.post(f"/api/sessions/{sid}/turns", json={"message": "then say hello"})
                assert r.status_code == 202 and r.json()["outcome"] == "queued", r.text
                open_gate(gate)
                rest = s.rest()
            first, second = turn_ends(ws, 2)
        # the running turn went on as it was: its second step never saw the message
        assert rest[-1].data["status"] == "complete" and first["turn_id"] == tid
        assert not [e for e in rest if e.event == "block_stop" and e.data["block"]["type"] == "user"]
        assert second["turn_id"] != tid and second["status"] == "complete"
        turns = c.get(f"/api/sessions/{sid}").json()["turns"]
    assert [(t["input"], t["status"]) for t in turns] == [("wait at the gate", "complete"),
                                                          ("then say hello", "complete")]
    requests = mock_provider.requests(m)
    assert len(requests) == 3 and "then say hello" not in json.dumps(requests[1])
    assert [b["text"] for b in requests[2]["messages"][-1]["content"]] == ["then say hello"]
