"""The protocol routes at the wire: ``/api/chat``'s resume and stop routes, the AI SDK version
the client names, approvals in message parts (6+), ``/api/ag-ui``'s refusals, what another
user reaches, and ``/openapi.json``. The npm clients themselves read these routes in
``tests/e2e/aisdk`` and ``tests/e2e/agui``.

A turn that must still be running while a test looks at it waits in the ``wait_for_gate``
tool until the test opens the gate (a FIFO): nothing here is timed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import Server, scenario
from tests.support.ui_stream import GATE, chunks, gated_server, open_gate, read_until, release, user

APPROVE = {"name": "approve", "fragment_size": 6, "steps": [
    {"blocks": [{"type": "text", "text": "I will send it."},
                {"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
    {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}]}
ECHO = {"name": "echo", "fragment_size": 6, "steps": [{"blocks": [{"type": "text", "text": "You said: {{input}}"}]}]}


@pytest.fixture(scope="module")
def proto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str], Path, str]]:
    tmp = tmp_path_factory.mktemp("protocols")
    models = {d["name"]: scenario(tmp / f"{d['name']}.json", d) for d in (GATE, APPROVE, ECHO)}
    with gated_server(tmp, models["echo"]) as (srv, gate):
        yield srv, models, gate, srv.add_user("eve", tmp)






def chat_id() -> str:
    return "chat-" + uuid.uuid4().hex[:10]


def test_resume_and_stop_routes(proto: tuple[Server, dict[str, str], Path, str]) -> None:
    srv, models, gate, other = proto
    cid = chat_id()
    body = {"id": cid, "messages": [user("go through the gate")], "model": models["gate"], "toolset": "none"}
    # Version 7 (every version streams a step live; 7 is the one this test reads).
    with srv.client() as c, srv.client(other) as o:
        c.headers["X-AI-SDK-Version"] = "7"
        # Nothing to resume or stop yet; a chat id that cannot be one is named.
        assert c.get(f"/api/chat/{cid}/stream").status_code == 204
        assert c.post(f"/api/chat/{cid}/stop").status_code == 404
        r = c.get("/api/chat/bad%20id/stream")
        assert r.status_code == 422 and r.json()["message"].startswith("path.chat_id:")
        # A turn that waits in its tool; the first stream is dropped (a dropped connection is no stop).
        with c.stream("POST", "/api/chat", json=body) as r:
            first = read_until(r.iter_lines(), "tool-input-available")
        turn_id = first[0]["messageId"]
        # Another user's chat of the same name is theirs, and empty: they neither follow nor stop this turn.
        assert o.get(f"/api/chat/{cid}/stream").status_code == 204
        assert o.post(f"/api/chat/{cid}/stop").status_code == 404
        # The owner resumes: the whole message from the store, then live once the gate opens.
        with c.stream("GET", f"/api/chat/{cid}/stream") as r:
            assert r.status_code == 200 and r.headers["x-vercel-ai-ui-message-stream"] == "v1"
            lines = r.iter_lines()
            replayed = read_until(lines, "tool-input-available")
            open_gate(gate)
            rest = chunks("\n\n".join(lines))
        assert replayed[0] == {"type": "start", "messageId": turn_id,
                               "messageMetadata": {"session_id": first[0]["messageMetadata"]["session_id"]}}
        every = replayed + rest
        texts = [c["delta"] for c in every if isinstance(c, dict) and c["type"] == "text-delta"]
        assert texts[0] == "Waiting for the gate." and "".join(texts[1:]) == "Done: through open"
        assert [c["type"] for c in every if isinstance(c, dict)].count("text-start") == 2
        assert every[-2]["messageMetadata"]["status"] == "complete" and every[-1] == "[DONE]"
        # Ended: nothing to resume or stop.
        assert c.get(f"/api/chat/{cid}/stream").status_code == 204
        assert c.post(f"/api/chat/{cid}/stop").status_code == 204
        # Stop is its own request.
        with c.stream("POST", "/api/chat", json={**body, "messages": [user("again")]}) as r:
            read_until(r.iter_lines(), "tool-input-available")
        r = c.post(f"/api/chat/{cid}/stop")
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        # Let the tool's thread go if it got to the gate; the stop may have come before the tool
        # started, and then nothing ever waits there (a blocking open_gate hung CI once).
        release(gate)
        sid = first[0]["messageMetadata"]["session_id"]
        assert [t["status"] for t in c.get(f"/api/sessions/{sid}").json()["turns"]] == ["complete", "cancelled"]


def test_version_is_the_clients_choice(proto: tuple[Server, dict[str, str], Path, str]) -> None:
    srv, models, _, _ = proto
    with srv.client() as c:
        body = {"id": chat_id(), "messages": [user("hi")], "model": models["echo"], "toolset": "none"}
        r = c.post("/api/chat", json=body, headers={"X-AI-SDK-Version": "9"})
        assert r.status_code == 422 and r.json()["message"].startswith("header.X-AI-SDK-Version:")
        r = c.post("/api/chat?ai_sdk=four", json=body)
        assert r.status_code == 422 and r.json()["message"].startswith("query.ai_sdk:")
        v5 = chunks(c.post("/api/chat", json=body).text)
        assert "finishReason" not in v5[-2]  # the bytes 5 always had
        for how in ({"headers": {"X-AI-SDK-Version": "6.0.326"}}, {"params": {"ai_sdk": "6"}}):
            v6 = chunks(c.post("/api/chat", json={**body, "id": chat_id()}, **how).text)  # type: ignore[arg-type]
            assert v6[-2]["type"] == "finish" and v6[-2]["finishReason"] == "stop"


def test_steps_are_live_unless_the_client_asks_for_whole_ones(proto: tuple[Server, dict[str, str], Path, str]) -> None:
    srv, models, _, _ = proto
    with srv.client() as c:
        body = {"id": chat_id(), "messages": [user("hi")], "model": models["echo"], "toolset": "none"}
        r = c.post("/api/chat", json=body, headers={"X-Turnstream-Steps": "tokens"})
        assert r.status_code == 422 and r.json()["message"].startswith("header.X-Turnstream-Steps:")
        r = c.get(f"/api/chat/{body['id']}/stream", params={"steps": "half"})
        assert r.status_code == 422 and r.json()["message"].startswith("query.steps:")
        r = c.post("/api/ag-ui", params={"steps": "half"}, json=_run("steps-" + uuid.uuid4().hex[:8], [
            {"id": "u1", "role": "user", "content": "hi"}]))
        assert r.status_code == 422 and r.json()["message"].startswith("query.steps:")
        for how in ({"headers": {"X-Turnstream-Steps": "whole"}}, {"params": {"steps": "WHOLE"}}, {}):
            got = chunks(c.post("/api/chat", json={**body, "id": chat_id()}, **how).text)  # type: ignore[arg-type]
            assert "".join(ch["delta"] for ch in got if isinstance(ch, dict) and ch["type"] == "text-delta") \
                == "You said: hi"


def test_approval_in_message_parts(proto: tuple[Server, dict[str, str], Path, str]) -> None:
    srv, models, _, _ = proto
    cid = chat_id()
    u = user("send the note")
    body = {"id": cid, "model": models["approve"], "toolset": "none"}
    with srv.client() as c:
        c.headers["X-AI-SDK-Version"] = "6"
        first = chunks(c.post("/api/chat", json={**body, "messages": [u]}).text)
        ask = next(ch for ch in first if isinstance(ch, dict) and ch["type"] == "tool-approval-request")
        call = next(ch for ch in first if isinstance(ch, dict) and ch["type"] == "tool-input-available")
        assert ask == {"type": "tool-approval-request", "approvalId": call["toolCallId"],
                       "toolCallId": call["toolCallId"]}
        assert first[-2]["finishReason"] == "tool-calls"
        part = {"type": "tool-send_note", "toolCallId": call["toolCallId"], "state": "approval-responded",
                "input": call["input"], "approval": {"id": ask["approvalId"], "approved": False, "reason": "not now"}}
        assistant = {"id": first[0]["messageId"], "role": "assistant", "parts": [{"type": "step-start"}, part]}
        r = c.post("/api/chat", json={**body, "approvals": [{"tool_use_id": "x", "approved": "yes"}],
                                      "messages": [u, assistant]})
        assert r.status_code == 422 and r.json()["message"].startswith("body.approvals[0].approved:")
        second = chunks(c.post("/api/chat", json={**body, "messages": [u, assistant]}).text)
        assert {"type": "tool-output-denied", "toolCallId": call["toolCallId"]} in second
        text = "".join(ch["delta"] for ch in second if isinstance(ch, dict) and ch["type"] == "text-delta")
        assert text.startswith("Outcome: The user denied this tool call") and text.endswith("reason: not now")
        # Answered: the same decision again finds nothing waiting.
        assert c.post("/api/chat", json={**body, "messages": [u, assistant]}).status_code == 409


def _run(thread: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, "tools": [], "context": [],
            **extra}


def _events(body: str) -> list[dict[str, Any]]:
    return [json.loads(f[len("data: "):]) for f in body.split("\n\n") if f.startswith("data: ")]


def test_ag_ui_refusals_and_threads(proto: tuple[Server, dict[str, str], Path, str]) -> None:
    srv, models, _, other = proto
    thread = "thread-" + uuid.uuid4().hex[:8]
    hello = [{"id": "u1", "role": "user", "content": "send the note"}]
    props = {"forwardedProps": {"model": models["approve"], "toolset": "none"}}
    with srv.client() as c, srv.client(other) as o:
        for bad, field in [({"threadId": "no spaces"}, "body.threadId"), ({"runId": ""}, "body.runId"),
                           ({"tools": [{"name": "bad name", "description": ""}]}, "body.tools[0].name"),
                           ({"forwardedProps": {"toolset": "shell"}}, "body.forwardedProps.toolset"),
                           ({"messages": [{"id": "a", "role": "assistant", "content": "hi"}]},
                            "body.messages[0].role")]:
            r = c.post("/api/ag-ui", json={**_run("bad-" + thread, hello), **bad})
            assert r.status_code == 422 and r.json()["message"].startswith(field + ":"), (bad, r.text)
        r = c.post("/api/ag-ui", content=b"{")
        assert r.status_code == 422
        # The thread pauses on an approval: an interrupt named by the call's id.
        events = _events(c.post("/api/ag-ui", json=_run(thread, hello, **props)).text)
        assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
        [interrupt] = events[-1]["outcome"]["interrupts"]
        # Another user's thread of the same name is another thread: a new run starts there.
        theirs = _events(o.post("/api/ag-ui", json=_run(thread, hello, forwardedProps={
            "model": models["echo"], "toolset": "none"})).text)
        assert theirs[-1]["outcome"] == {"type": "success"}
        assert theirs[0]["metadata"]["session_id"] != events[0]["metadata"]["session_id"]
        assert o.post(f"/api/ag-ui/{thread}/stop").status_code == 204  # theirs, idle
        # Answers that do not fit are refused, by field or in the stream as AG-UI asks.
        bad_payload = {"resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": 1}}]}
        r = c.post("/api/ag-ui", json=_run(thread, hello, **bad_payload))
        assert r.status_code == 422 and r.json()["message"].startswith("body.resume[0].payload.approved:")
        unknown = _events(c.post("/api/ag-ui", json=_run(thread, hello, resume=[
            {"interruptId": "nope", "status": "cancelled"}])).text)
        assert unknown[-1]["type"] == "RUN_ERROR" and unknown[-1]["code"] == "unknown_interrupt"
        # Cancelled is a denial; the run goes on with the call's result.
        done = _events(c.post("/api/ag-ui", json=_run(thread, hello, resume=[
            {"interruptId": interrupt["id"], "status": "cancelled"}])).text)
        result = next(e for e in done if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == interrupt["toolCallId"] and "denied" in result["content"]
        assert done[-1]["outcome"] == {"type": "success"}
        assert c.post(f"/api/ag-ui/{thread}/stop").status_code == 204
        assert c.post("/api/ag-ui/nothread/stop").status_code == 404


def test_openapi_lists_the_protocol_routes(proto: tuple[Server, dict[str, str], Path, str]) -> None:
    srv, _, _, _ = proto
    with srv.client() as c:
        doc = c.get("/openapi.json").json()
    paths = doc["paths"]
    assert set(paths["/api/chat/{chat_id}/stream"]) == {"get"}
    assert set(paths["/api/chat/{chat_id}/stop"]) == {"post"}
    assert set(paths["/api/ag-ui"]) == {"post"} and set(paths["/api/ag-ui/{thread_id}/stop"]) == {"post"}
    assert "204" in paths["/api/chat/{chat_id}/stream"]["get"]["responses"]
    assert {"404", "422"} <= set(paths["/api/chat/{chat_id}/stop"]["post"]["responses"])
    assert paths["/api/ag-ui"]["post"]["requestBody"]["content"]["application/json"]["schema"] == \
        {"$ref": "#/components/schemas/RunAgentInputIn"}
    params = {(p["in"], p["name"]) for p in paths["/api/chat"]["post"]["parameters"]}
    assert params == {("header", "X-AI-SDK-Version"), ("query", "ai_sdk"), ("header", "X-Turnstream-Steps"),
                      ("query", "steps")}
    agui = {(p["in"], p["name"]) for p in paths["/api/ag-ui"]["post"]["parameters"]}
    assert agui == {("header", "X-Turnstream-Steps"), ("query", "steps")}
    assert "approvals" in doc["components"]["schemas"]["ChatRequest"]["properties"]
