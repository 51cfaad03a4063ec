"""The mock's Chat Completions and Responses frames have the live APIs' shape, compared with
recorded streams: framing, field order, the usage chunk, [DONE], event lines, sequence numbers."""

from __future__ import annotations

import json
import re

from tests.support.replay import assemble, case, drive
from turnstream.blocks import TextBlock, ThinkingBlock, ToolUseBlock
from turnstream.mock import openai_chat_wire, openai_responses_wire
from turnstream.scenarios.engine import RequestView, Scenario

SCRIPT = Scenario({"fragment_size": 3, "steps": [{"blocks": [
    {"type": "thinking", "thinking": "Hmm.", "signature": "s"}, {"type": "text", "text": "Looking."},
    {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}, "id": "call_1"},
    {"type": "tool_use", "name": "get_time", "input": {}, "id": "call_2"}]}]}).script(RequestView(1, 0, [], "q"))


def payloads(body: bytes) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(m) for m in re.findall(rb"^data: (\{.*\})$", body, re.M)]


def test_chat_frames_look_like_openai() -> None:
    body = b"".join(openai_chat_wire.frames(SCRIPT, msg_id="chatcmpl-x", model="gpt-x"))
    recorded = case("openai-chat", "openai-single-tool-call-usage").body
    assert re.fullmatch(rb"(data: [^\n]+\n\n)+", body)
    assert body.endswith(b"data: [DONE]\n\n") and recorded.endswith(b"data: [DONE]\n\n")
    mine, theirs = payloads(body), payloads(recorded)
    assert [k for k in mine[0] if k != "obfuscation"] == [k for k in theirs[0] if k != "obfuscation"]
    assert list(mine[0]["choices"][0]) == list(theirs[0]["choices"][0])
    assert mine[-1]["choices"] == [] == theirs[-1]["choices"]
    assert list(mine[-1]["usage"])[:3] == list(theirs[-1]["usage"])[:3]
    first_call = next(p for p in mine if p["choices"] and "tool_calls" in p["choices"][0]["delta"])
    assert list(first_call["choices"][0]["delta"]["tool_calls"][0]) == ["index", "id", "type", "function"]
    asm = assemble("openai-chat", drive("openai-chat", [body]).events)
    assert [type(b) for b in asm.blocks] == [ThinkingBlock, TextBlock, ToolUseBlock, ToolUseBlock]
    assert asm.step is not None and asm.step.stop_reason == "tool_use"


def test_responses_frames_look_like_openai() -> None:
    body = b"".join(openai_responses_wire.frames(SCRIPT, msg_id="resp_x", model="gpt-x"))
    recorded = case("openai-responses", "function-call-basic").body
    events = re.findall(rb"event: ([^\n]+)\ndata: (\{[^\n]*\})\n\n", body)
    assert b"".join(b"event: %s\ndata: %s\n\n" % e for e in events) == body
    docs = [json.loads(d) for _, d in events]
    assert all(name.decode() == d["type"] and list(d)[:2] == ["type", "sequence_number"]
               for (name, _), d in zip(events, docs, strict=True))
    assert [d["sequence_number"] for d in docs] == list(range(len(docs)))
    theirs = payloads(recorded)
    assert docs[0]["type"] == theirs[0]["type"] == "response.created"
    assert docs[-1]["type"] == theirs[-1]["type"] == "response.completed"
    assert set(docs[-1]["response"]) <= set(theirs[-1]["response"]) | {"user"}
    added = [d for d in docs if d["type"] == "response.output_item.added"]
    mine_call = next(d for d in added if d["item"]["type"] == "function_call")
    their_call = next(d for d in theirs if d["type"] == "response.output_item.added")
    assert list(mine_call["item"]) == list(their_call["item"])
    assert b"[DONE]" not in body
    asm = assemble("openai-responses", drive("openai-responses", [body]).events)
    assert [type(b) for b in asm.blocks] == [ThinkingBlock, TextBlock, ToolUseBlock, ToolUseBlock]
    assert asm.step is not None and asm.step.stop_reason == "tool_use"
