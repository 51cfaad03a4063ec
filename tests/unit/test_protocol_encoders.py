"""The AI SDK and AG-UI encoders, fed event objects directly: that deltas go out as they
arrive, and what a restarted step (live and ``whole``), an approval, a client tool and a
notebook change become on each wire, version by version."""

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
from turnstream.server.aisdk import DISCARDED, UIMessageStreamEncoder, Version, finish_reason

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


BROKEN_OPEN = [StepStart(step=1, max_steps=10), BlockStart(index=0, type="text"), BlockDelta(index=0, text="broken ha"),
               BlockStart(index=1, type="tool_use", tool_use_id="c1", tool_name="calculator"),
               BlockDelta(index=1, partial_json='{"expr'), StepRestart(step=1, reason="drop"),
               StepStart(step=1, max_steps=10), *text(0, "whole answer"), done()]
"""A step whose stream breaks with a text and a call open."""


@pytest.mark.parametrize("version", [5, 6, 7])
def test_every_version_streams_each_delta_as_it_arrives(version: Version) -> None:
    batches = ui(UIMessageStreamEncoder(version=version), BROKEN_OPEN[:5])
    assert batches[2] == [{"type": "text-delta", "id": "p0-0", "delta": "broken ha"}]
    assert batches[4] == [{"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"expr'}]


@pytest.mark.parametrize("version", [5, 6])
def test_before_7_a_restart_ends_the_broken_parts_marked_and_starts_the_step_again(version: Version) -> None:
    batches = ui(UIMessageStreamEncoder(version=version), BROKEN_OPEN)
    assert batches[5] == [
        {"type": "text-end", "id": "p0-0", "providerMetadata": DISCARDED},
        {"type": "tool-input-error", "toolCallId": "c1", "toolName": "calculator", "input": '{"expr',
         "errorText": "discarded: the model's stream broke and the step was asked again",
         "providerMetadata": DISCARDED}]
    out = flat(batches[6:])
    assert [c["type"] for c in out] == ["finish-step", "start-step", "text-start", "text-delta", "text-end",
                                        "finish-step", "finish"]
    assert out[2]["id"] == "p1-0", "the new attempt's parts have ids of their own"


@pytest.mark.parametrize("version", [5, 6])
def test_before_7_a_text_ends_once_the_steps_stream_has_so_that_a_restart_can_mark_it(version: Version) -> None:
    batches = ui(UIMessageStreamEncoder(version=version), RESTARTED)
    assert batches[3] == [], "the block ended, the step's stream has not"
    assert batches[4] == [{"type": "text-end", "id": "p0-0", "providerMetadata": DISCARDED}]
    out = flat(batches[5:])
    assert [c["type"] for c in out] == ["finish-step", "start-step", "text-start", "text-delta", "text-end",
                                        "finish-step", "finish"]
    assert "providerMetadata" not in out[4]


def test_before_7_a_restart_after_a_complete_call_gives_the_call_an_error() -> None:
    events = [StepStart(step=1, max_steps=10), *call(0, "c1", "calculator"), StepRestart(step=1, reason="max_tokens"),
              StepStart(step=1, max_steps=10), *call(0, "c2", "calculator"), *result(1, "c1", "late"),
              *result(1, "c2", "5"), done()]
    batches = ui(UIMessageStreamEncoder(version=6), events)
    assert batches[4] == [{"type": "tool-output-error", "toolCallId": "c1",
                           "errorText": "discarded: the model's stream broke and the step was asked again"}]
    outputs = [c for c in flat(batches) if c["type"] == "tool-output-available"]
    assert outputs == [{"type": "tool-output-available", "toolCallId": "c2", "output": "5"}], "c1 is no call any more"


@pytest.mark.parametrize("version", [5, 6])
def test_before_7_a_restart_before_any_part_goes_on_in_the_same_step(version: Version) -> None:
    events = [StepStart(step=1, max_steps=10), StepRestart(step=1, reason="drop"), StepStart(step=1, max_steps=10),
              *text(0, "whole answer"), done()]
    out = flat(ui(UIMessageStreamEncoder(version=version), events))
    assert [c["type"] for c in out] == ["start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"]


@pytest.mark.parametrize("version", [5, 6, 7])
def test_whole_steps_are_held_and_a_restart_drops_them(version: Version) -> None:
    batches = ui(UIMessageStreamEncoder(version=version, steps="whole"), BROKEN_OPEN)
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
    enc = UIMessageStreamEncoder(version=6, steps="whole")
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


def test_ag_ui_streams_live_and_a_restart_ends_what_is_open_then_snapshots_the_messages() -> None:
    given = [{"id": "u1", "role": "user", "content": "hi"}]
    before = [StepStart(step=1, max_steps=10), *call(0, "c0", "calculator"), *result(1, "c0", "5")]
    enc = AGUIEncoder(thread_id="th", run_id="r1", model="m", messages=given)
    enc.start()
    batches = [enc.feed(e) for e in envs(*before, *BROKEN_OPEN)]
    assert batches[len(before) + 2] == [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1-0-0", "delta": "broken ha"}]
    restart = batches[len(before) + 5]
    assert restart[:2] == [{"type": "TEXT_MESSAGE_END", "messageId": "r1-0-0"},
                           {"type": "TOOL_CALL_END", "toolCallId": "c1"}]
    assert restart[2] == {"type": "MESSAGES_SNAPSHOT", "messages": [
        given[0],
        {"id": "c0", "role": "assistant", "toolCalls": [
            {"id": "c0", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]},
        {"id": "result-c0", "toolCallId": "c0", "role": "tool", "content": "5"}]}
    after = [e["type"] for b in batches[len(before) + 6:] for e in b]
    assert after == ["STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                     "STEP_FINISHED", "RUN_FINISHED"]
    assert batches[len(before) + 7][0]["messageId"] == "r1-1-0", "the new attempt's message has an id of its own"


def test_ag_ui_whole_steps_hold_a_restarted_step() -> None:
    enc, out = agui(BROKEN_OPEN, steps="whole")
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


# The agent that speaks, in a session of several agents -----------------------------------------------------------

def spoken_by(agent: str | None) -> list[StreamEvent]:
    return [StepStart(step=1, max_steps=10, agent=agent),
            BlockStart(index=0, type="text", agent=agent), BlockDelta(index=0, text="hi"),
            BlockStop(index=0, block=TextBlock(seq=0, step=1, text="hi", agent=agent)),
            BlockStart(index=1, type="tool_use", tool_use_id="c1", tool_name="t", agent=agent),
            BlockStop(index=1, block=ToolUseBlock(seq=1, step=1, tool_use_id="c1", name="t", agent=agent)), done()]


@pytest.mark.parametrize("version", [5, 6, 7])
def test_ai_sdk_parts_name_their_agent_in_provider_metadata(version: Version) -> None:
    chunks = flat(ui(UIMessageStreamEncoder(version=version), spoken_by("writer")))
    text_start = next(c for c in chunks if c["type"] == "text-start")
    assert text_start["providerMetadata"] == {"turnstream": {"agent": "writer"}}
    call_start = next(c for c in chunks if c["type"] == "tool-input-start")
    # 5's tool-input-start has no providerMetadata in its schema.
    assert call_start.get("providerMetadata") == (None if version == 5 else {"turnstream": {"agent": "writer"}})
    # Whole blocks (replayed) carry it too; a one-agent session carries none.
    replayed = [e for e in spoken_by("writer") if not isinstance(e, BlockStart | BlockDelta)]
    whole = next(c for c in flat(ui(UIMessageStreamEncoder(version=version), replayed)) if c["type"] == "text-start")
    assert whole["providerMetadata"] == {"turnstream": {"agent": "writer"}}
    assert not any("providerMetadata" in c for c in flat(ui(UIMessageStreamEncoder(version=version), spoken_by(None))))


def test_ag_ui_text_messages_are_named_by_their_agent() -> None:
    enc, out = agui(spoken_by("writer"))
    start = next(e for e in out if e["type"] == "TEXT_MESSAGE_START")
    assert start["name"] == "writer"
    assert [m.get("name") for m in enc._messages.snapshot() if m["role"] == "assistant"] == ["writer", None]
    _, plain = agui(spoken_by(None))
    assert "name" not in next(e for e in plain if e["type"] == "TEXT_MESSAGE_START")
