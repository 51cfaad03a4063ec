"""A new user message on ``POST /api/ag-ui`` while its thread's turn runs or waits
(docs/steering.md, docs/ag-ui.md), against a real ``turnstream serve`` whose model is
``turnstream mock-provider`` (Anthropic format): queued for the running turn's next step (the
run says so in a ``CUSTOM`` event and finishes), or the reason for denying the calls an
interrupt waits on (the run goes on with the turn). The running turn is held in a tool until
the test opens a gate: nothing is timed."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.server import Server
from tests.support.ui_stream import chunks, gated_server, open_gate, read_until

_names = itertools.count()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[tuple[Server, Path]]:
    tmp = tmp_path_factory.mktemp("agui-steering")
    with gated_server(tmp, "scripted:echo", mock_provider.env()) as served:
        yield served


def model(mock: MockHandle, steps: list[dict[str, Any]]) -> str:
    return "anthropic:" + mock.scenario(f"agui-steer-{next(_names)}", {"steering": True, "steps": steps})


def run(thread: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, "tools": [], "context": [],
            **extra}


def user(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex[:8], "role": "user", "content": text}


def text_of(evs: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in evs if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_message_while_the_turn_runs_is_queued_for_its_next_step(served: tuple[Server, Path],
                                                                   mock_provider: MockHandle) -> None:
    srv, gate = served
    m = model(mock_provider, [{"blocks": [{"type": "tool_use", "name": "wait_for_gate", "input": {}}]},
                              {"blocks": [{"type": "text", "text": "Noted."}]}])
    thread = f"queue-{next(_names)}"
    first = user("wait at the gate")
    with srv.client() as c, srv.client() as other, c.stream("POST", "/api/ag-ui", json=run(
            thread, [first], forwardedProps={"model": m, "toolset": "none"})) as running:
        lines = running.iter_lines()
        turn_id = read_until(lines, "TOOL_CALL_END")[0]["metadata"]["turn_id"]
        # Anything but a new user message still finds the turn running.
        r = other.post("/api/ag-ui", json=run(thread, [first, {"id": "t", "role": "tool", "content": "x",
                                                               "toolCallId": "nope"}]))
        assert r.status_code == 409, r.text
        r = other.post("/api/ag-ui", json=run(thread, [first, user("   ")]))
        assert r.status_code == 422 and r.json()["message"].startswith("body.messages[1].content:")
        r = other.post("/api/ag-ui", json=run(thread, [first, user("use metric units")]))
        assert r.status_code == 200 and r.headers["x-turn-id"] == turn_id
        queued = chunks(r.text)
        assert [e["type"] for e in queued] == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
        assert queued[1] == {"type": "CUSTOM", "name": "turnstream-steering",
                             "value": {"turn_id": turn_id, "outcome": "queued", "tool_use_ids": []}}
        assert queued[2]["outcome"] == {"type": "success"}
        open_gate(gate)
        rest = chunks("\n\n".join(lines))
    assert text_of(rest) == "Noted."
    assert rest[-1]["type"] == "RUN_FINISHED" and rest[-1]["outcome"] == {"type": "success"}
    before, after = mock_provider.requests(m)[-2:]
    assert "use metric units" not in json.dumps(before)
    assert "use metric units" in json.dumps(after["messages"][-1])  # beside the tool's result


def test_a_message_during_an_interrupt_denies_it_and_the_run_goes_on(served: tuple[Server, Path],
                                                                     mock_provider: MockHandle) -> None:
    srv, _ = served
    m = model(mock_provider, [
        {"blocks": [{"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
        {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}])
    thread = f"deny-{next(_names)}"
    hello = user("send ada a note")
    with srv.client() as c:
        paused = chunks(c.post("/api/ag-ui", json=run(thread, [hello], forwardedProps={
            "model": m, "toolset": "none"})).text)
        [interrupt] = paused[-1]["outcome"]["interrupts"]
        call_id = interrupt["toolCallId"]
        asked = {"id": call_id, "role": "assistant", "toolCalls": [
            {"id": call_id, "type": "function", "function": {"name": "send_note", "arguments": "{}"}}]}
        # Neither resume entries nor a new user message: the interrupt is left unanswered.
        unanswered = chunks(c.post("/api/ag-ui", json=run(thread, [hello, asked])).text)
        assert unanswered[-1]["type"] == "RUN_ERROR" and unanswered[-1]["code"] == "interrupts_unanswered"
        went_on = chunks(c.post("/api/ag-ui", json=run(thread, [hello, asked, user("not to ada; ask me first")]))
                         .text)
    assert went_on[0]["type"] == "RUN_STARTED" and went_on[0]["metadata"]["turn_id"] == paused[0]["metadata"][
        "turn_id"]
    assert went_on[1] == {"type": "CUSTOM", "name": "turnstream-steering", "value": {
        "turn_id": paused[0]["metadata"]["turn_id"], "outcome": "denied", "tool_use_ids": [call_id]}}
    result = next(e for e in went_on if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == call_id and result["content"].endswith("The user's reason: not to ada; ask me first")
    assert text_of(went_on) == "Outcome: " + result["content"]
    assert went_on[-1]["type"] == "RUN_FINISHED" and went_on[-1]["outcome"] == {"type": "success"}
    assert "not to ada; ask me first" in json.dumps(mock_provider.requests(m)[-1])
