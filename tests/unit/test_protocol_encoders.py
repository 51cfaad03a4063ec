"""The AI SDK and AG-UI encoders, fed event objects directly: what a restarted step, an
approval, a client tool and a notebook change become on each wire, version by version."""

from __future__ import annotations

from typing import Any

import pytest

from turnstream.blocks import TextBlock, ToolResultBlock, ToolUseBlock, Usage
from turnstream.bus import Envelope
from turnstream.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    StepRestart,
    StepStart,
    StreamEvent,
    ToolApproval,
    ToolRequest,
    TurnComplete,
)
from turnstream.server.agui import AGUIEncoder
from turnstream.server.aisdk import UIMessageStreamEncoder, Version, finish_reason

T = "turn_1"


def envs(*events: StreamEvent) -> list[Envelope]:
    out = []
    for n, ev in enumerate(events, 1):
        ev.turn_id, ev.n = T, n
        out.append(Envelope.of("s", ev))
    return out


def text(index: int, value: str, step: int = 1) -> list[StreamEvent]:
    return [BlockStart(index=index, type="text"), BlockDelta(index=index, text=value),
            BlockStop(index=index, block=TextBlock(seq=index, step=step, text=value))]


def call(index: int, call_id: str, name: str, step: int = 1) -> list[StreamEvent]:
    return [BlockStart(index=index, type="tool_use", tool_use_id=call_id, tool_name=name),
            BlockDelta(index=index, partial_json="{}", input={}),
            BlockStop(index=index, block=ToolUseBlock(seq=index, step=step, tool_use_id=call_id, name=name))]


def result(index: int, call_id: str, content: str, is_error: bool = False) -> list[StreamEvent]:
    block = ToolResultBlock(seq=index, step=1, tool_use_id=call_id, content=content, is_error=is_error)
    return [BlockStart(index=index, type="tool_result", tool_use_id=call_id, tool_name="t"),
            BlockStop(index=index, block=block)]


def done(status: Any = "complete", stop: Any = "end_turn", usage: Usage | None = None) -> TurnComplete:
    return TurnComplete(status=status, stop_reason=stop, usage=usage or Usage(), steps=1)


def ui(encoder: UIMessageStreamEncoder, events: list[StreamEvent]) -> list[list[dict[str, Any]]]:
    """The chunks each event gave, event by event."""
    return [encoder.feed(e) for e in envs(*events)]


def flat(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [c for b in batches for c in b]


RESTARTED = [StepStart(step=1, max_steps=10), *text(0, "broken ha"), StepRestart(step=1, reason="drop"),
             StepStart(step=1, max_steps=10), *text(0, "whole answer"), done()]


@pytest.mark.parametrize("version", [5, 6])
def test_before_7_a_step_is_held_and_a_restart_drops_it(version: Version) -> None:
    batches = ui(UIMessageStreamEncoder(version=version), RESTARTED)
    assert all(b == [] for b in batches[:-1]), "nothing of a step goes out before its stream has ended"
    out = flat(batches)
    assert [c["type"] for c in out] == ["start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]
    assert out[2]["delta"] == "whole answer"


def test_in_7_a_step_streams_and_a_restart_is_reset_step() -> None:
    out = flat(ui(UIMessageStreamEncoder(version=7), RESTARTED))
    assert [c["type"] for c in out] == [
        "start-step", "text-start", "text-delta", "text-end", "reset-step",
        "text-start", "text-delta", "text-end", "finish-step", "finish"]
    assert out[1]["id"] != out[5]["id"], "the new attempt's parts have ids of their own"
    assert out[-1]["finishReason"] == "stop"


def test_held_step_goes_out_when_its_tools_begin() -> None:
    enc = UIMessageStreamEncoder(version=6)
    batches = ui(enc, [StepStart(step=1, max_steps=10), *text(0, "Adding."), *call(1, "c1", "calculator"),
                       *result(2, "c1", "5")])
    assert batches[:-2] == [[]] * (len(batches) - 2)
    released = batches[-2]
    assert [c["type"] for c in released][:2] == ["start-step", "text-start"]
    assert released[-1]["type"] == "tool-input-available"
    assert batches[-1] == [{"type": "tool-output-available", "toolCallId": "c1", "output": "5"}]


def approval_turn() -> list[StreamEvent]:
    return [StepStart(step=1, max_steps=10), *call(0, "c1", "send_note"),
            ToolRequest(tool_use_id="c1", tool_name="send_note", executor="server", requires_approval=True),
            done("awaiting_client", "awaiting_client")]


def test_approval_request_by_version() -> None:
    v5 = flat(ui(UIMessageStreamEncoder(version=5), approval_turn()))
    assert "tool-approval-request" not in [c["type"] for c in v5]
    assert "finishReason" not in v5[-1]
    v6 = flat(ui(UIMessageStreamEncoder(version=6), approval_turn()))
    assert v6[-3:] == [{"type": "tool-approval-request", "approvalId": "c1", "toolCallId": "c1"},
                       {"type": "finish-step"}, v6[-1]]
    assert v6[-1]["finishReason"] == "tool-calls"
    # A call approved by the client in this request: no new request, and a denial is denied.
    enc = UIMessageStreamEncoder(version=6, known_calls={"c1"}, denied={"c1"})
    denied = flat(ui(enc, result(1, "c1", "denied", is_error=True)))
    assert denied == [{"type": "tool-output-denied", "toolCallId": "c1"}]


def test_replayed_approval_in_7_shows_the_decision() -> None:
    events = [*approval_turn()[:-1], ToolApproval(tool_use_id="c1", approved=True), *result(1, "c1", "sent"), done()]
    types = [c["type"] for c in flat(ui(UIMessageStreamEncoder(version=7), events))]
    assert types[-5:] == ["tool-approval-request", "tool-approval-response", "tool-output-available", "finish-step",
                          "finish"]
    six = [c["type"] for c in flat(ui(UIMessageStreamEncoder(version=6), events))]
    assert "tool-approval-request" not in six  # 6 cannot say it was answered: only the output


def test_finish_reasons() -> None:
    assert finish_reason("complete", "max_tokens", 6) == "length"
    assert finish_reason("failed", "error", 6) == "error"
    assert finish_reason("interrupted", "error", 6) == "error"
    assert finish_reason("interrupted", "error", 7) == "interrupted"
    assert finish_reason("complete", "refusal", 7) == "content-filter"


def test_notebook_change_is_a_data_part_keyed_by_cell() -> None:
    enc = UIMessageStreamEncoder(version=6)
    msg = {"type": "notebook", "session_id": "s", "version": 3, "change": "cell_output",
           "cell": {"id": "cell_a", "code": "1", "status": "success"}}
    assert enc.note(msg) == [{"type": "data-notebook-cell", "id": "cell_a",
                              "data": {"change": "cell_output", "version": 3, "cell": msg["cell"]}}]
    assert enc.note({"type": "notebook", "cell": None}) == []


# AG-UI ----------------------------------------------------------------------------------------

def agui(events: list[StreamEvent], **kw: Any) -> tuple[AGUIEncoder, list[dict[str, Any]]]:
    enc = AGUIEncoder(thread_id="th", run_id="r1", model="m", **kw)
    out = enc.start()
    for e in envs(*events):
        out += enc.feed(e)
    return enc, out


def test_ag_ui_frames_a_run_and_holds_a_restarted_step() -> None:
    enc, out = agui(RESTARTED)
    types = [e["type"] for e in out]
    assert types == ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                     "STEP_FINISHED", "RUN_FINISHED"]
    assert out[3]["delta"] == "whole answer"
    assert out[-1]["outcome"] == {"type": "success"} and enc.ended


def test_ag_ui_outcomes() -> None:
    _, out = agui(approval_turn())
    interrupt = out[-1]["outcome"]["interrupts"][0]
    assert (interrupt["id"], interrupt["reason"], interrupt["toolCallId"]) == ("c1", "tool_call", "c1")
    assert interrupt["responseSchema"]["required"] == ["approved"]
    client = [StepStart(step=1, max_steps=10), *call(0, "c9", "get_location"),
              ToolRequest(tool_use_id="c9", tool_name="get_location", executor="client"),
              done("awaiting_client", "awaiting_client")]
    _, out = agui(client)
    assert out[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c9"]}
    _, out = agui([StepStart(step=1, max_steps=10), done("cancelled", "cancelled")])
    assert out[-1]["outcome"] == {"type": "cancelled"}
    enc, out = agui([StepStart(step=1, max_steps=10), *text(0, "so"),
                     ErrorEvent(code="provider_status", message="boom"), done("failed", "error")])
    assert out[-1] == {"type": "RUN_ERROR", "message": "boom", "code": "provider_status"}
    assert [e["type"] for e in out].count("RUN_ERROR") == 1 and enc.ended


def test_ag_ui_usage_counts_this_run_only() -> None:
    before = Usage(input_tokens=10, output_tokens=5, cache_read_input_tokens=2)
    after = Usage(input_tokens=25, output_tokens=9, cache_read_input_tokens=7, cache_creation_input_tokens=1)
    _, out = agui([done(usage=after)], base_usage=before)
    assert out[-1]["usage"] == [{"model": "m", "inputTokens": 15 + 5 + 1, "outputTokens": 4, "totalTokens": 25,
                                 "cachedInputTokens": 5, "cacheWriteInputTokens": 1}]


def test_ag_ui_notebook_state_and_its_patches() -> None:
    state = {"type": "notebook_state", "version": 4, "cells": [{"id": "a"}, {"id": "b"}], "sandbox": None}
    enc, out = agui([], notebook=state)
    assert out[1] == {"type": "STATE_SNAPSHOT",
                      "snapshot": {"notebook": {"version": 4, "cells": [{"id": "a"}, {"id": "b"}], "sandbox": None}}}

    def change(kind: str, cid: str, version: int, **extra: Any) -> list[dict[str, Any]]:
        return enc.note({"type": "notebook", "change": kind, "version": version, "cell": {"id": cid}, **extra})

    assert change("cell_created", "old", 4, index=0) == []  # already in the snapshot
    [delta] = change("cell_created", "c", 5, index=1)
    assert delta["delta"] == [{"op": "add", "path": "/notebook/cells/1", "value": {"id": "c"}},
                              {"op": "replace", "path": "/notebook/version", "value": 5}]
    assert change("cell_output", "b", 6)[0]["delta"][0] == {"op": "replace", "path": "/notebook/cells/2",
                                                            "value": {"id": "b"}}
    assert change("cell_deleted", "a", 7)[0]["delta"][0] == {"op": "remove", "path": "/notebook/cells/0"}
    assert change("cell_output", "zz", 8) == []
