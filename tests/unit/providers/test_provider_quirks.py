"""One named fixture per provider quirk of PROVIDER-FACTS.md, with what is odd about it.

These are written by hand (no public recording exists for them, see the fixtures README
"Gaps"): each is the smallest stream that shows the quirk.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.replay import assemble, cases, drive, random_pieces
from turnstream.blocks import TextBlock, ThinkingBlock, ToolUseBlock
from turnstream.errors import ProviderStreamError, StreamBrokenError
from turnstream.providers.base import BlockClosed, BlockOpened
from turnstream.providers.openai_chat import OpenAIChatProvider, new_tool_id


def chat(*deltas: dict | None, finish: str | None = "tool_calls", done: bool = True) -> bytes:  # type: ignore[type-arg]
    """A Chat Completions body: one chunk per delta, a finish chunk, optionally ``[DONE]``."""
    out = b""
    for d in deltas:
        payload = {"id": "chatcmpl-q", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
        out += b"data: " + json.dumps(payload).encode() + b"\n\n"
    if finish is not None:
        payload = {"id": "chatcmpl-q", "object": "chat.completion.chunk", "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        out += b"data: " + json.dumps(payload).encode() + b"\n\n"
    if done:
        out += b"data: [DONE]\n\n"
    return out


def call(index: int | None, id_: str | None = None, name: str | None = None, arguments: object = None) -> dict:  # type: ignore[type-arg]
    tc: dict[str, object] = {"function": {}}
    if index is not None:
        tc["index"] = index
    if id_ is not None:
        tc["id"] = id_
        tc["type"] = "function"
    fn: dict[str, object] = {}
    if name is not None:
        fn["name"] = name
    fn["arguments"] = arguments
    tc["function"] = fn
    return {"tool_calls": [tc]}


def run_chat(body: bytes, **kw: object):  # type: ignore[no-untyped-def]
    out = drive("openai-chat", [body], **kw)  # type: ignore[arg-type]
    return out, assemble("openai-chat", out.events)


def calls_of(asm) -> list[tuple[str, str, dict]]:  # type: ignore[no-untyped-def, type-arg]
    return [(b.tool_use_id, b.name, b.input) for b in asm.blocks if isinstance(b, ToolUseBlock)]


# Ollama: every parallel call arrives at index 0; only the id tells them apart. Read by index
# alone, names and arguments would be glued into one call.
OLLAMA_PARALLEL_INDEX_0 = chat(
    call(0, "call_a1", "get_weather", '{"city": "Paris"}'),
    call(0, "call_b2", "get_time", '{"tz": "CET"}'),
    finish="tool_calls")


def test_ollama_parallel_calls_at_index_0_are_told_apart_by_id() -> None:
    out, asm = run_chat(OLLAMA_PARALLEL_INDEX_0)
    assert out.error is None
    assert calls_of(asm) == [("call_a1", "get_weather", {"city": "Paris"}),
                             ("call_b2", "get_time", {"tz": "CET"})]


# Some servers send `arguments` as a JSON object rather than a string. It is serialised once
# here, so the arguments sent back are a string holding the object, not a string of a string.
ARGUMENTS_AS_OBJECT = chat(call(0, "call_o", "get_weather", {"city": "Paris", "days": 2}))


def test_arguments_as_an_object_are_encoded_once() -> None:
    _out, asm = run_chat(ARGUMENTS_AS_OBJECT)
    [block] = [b for b in asm.blocks if isinstance(b, ToolUseBlock)]
    assert block.input == {"city": "Paris", "days": 2}
    assert json.loads(block.raw_input or "") == {"city": "Paris", "days": 2}


# `arguments: null` and `arguments: ""` for a call without parameters: the input is {}.
ARGUMENTS_NULL = chat(call(0, "call_n", "get_time", None))
ARGUMENTS_EMPTY = chat(call(0, "call_e", "get_time", ""), call(0, None, None, ""))


@pytest.mark.parametrize("body", [ARGUMENTS_NULL, ARGUMENTS_EMPTY], ids=["null", "empty-string"])
def test_null_or_empty_arguments_are_an_empty_object(body: bytes) -> None:
    _out, asm = run_chat(body)
    [block] = [b for b in asm.blocks if isinstance(b, ToolUseBlock)]
    assert (block.input, block.input_error) == ({}, None)
    assert asm.step is not None and asm.step.stop_reason == "tool_use"


# Arguments encoded twice by the server ("\"{\\\"a\\\": 1}\""): decoded once more, never more.
ARGUMENTS_DOUBLE_ENCODED = chat(call(0, "call_d", "f", json.dumps(json.dumps({"a": 1}))))


def test_double_encoded_arguments_are_decoded_once() -> None:
    _, asm = run_chat(ARGUMENTS_DOUBLE_ENCODED)
    assert calls_of(asm) == [("call_d", "f", {"a": 1})]


# Some servers end a tool call with finish_reason "stop".
FINISH_STOP_WITH_TOOL_CALLS = chat(call(0, "call_s", "f", '{"x": 1}'), finish="stop")


def test_finish_stop_with_tool_calls_is_tool_use() -> None:
    _, asm = run_chat(FINISH_STOP_WITH_TOOL_CALLS)
    assert asm.step is not None and asm.step.stop_reason == "tool_use"


@pytest.mark.parametrize(("finish", "stop"), [("length", "max_tokens"), ("content_filter", "refusal"),
                                              ("stop", "end_turn"), ("tool_calls", "end_turn")])
def test_finish_reasons_without_tool_calls(finish: str, stop: str) -> None:
    _, asm = run_chat(chat({"content": "hi"}, finish=finish))
    assert asm.step is not None and asm.step.stop_reason == stop


# No [DONE]: complete when the body closed cleanly after a finish_reason ...
NO_DONE = chat({"content": "Hello"}, finish="stop", done=False)
# ... broken when it closed before any finish_reason (even after a tool call's fragments).
NO_FINISH = chat(call(0, "call_x", "f", '{"x": 1}'), finish=None, done=False)
DONE_WITHOUT_FINISH = chat({"content": "Hello"}, finish=None, done=True)


def test_no_done_after_a_finish_reason_is_complete() -> None:
    out, asm = run_chat(NO_DONE)
    assert out.error is None and asm.step is not None and asm.step.stop_reason == "end_turn"
    assert [b.text for b in asm.blocks if isinstance(b, TextBlock)] == ["Hello"]


@pytest.mark.parametrize("body", [NO_FINISH, DONE_WITHOUT_FINISH], ids=["clean-close", "done"])
def test_no_finish_reason_is_a_broken_stream(body: bytes) -> None:
    out, asm = run_chat(body)
    assert isinstance(out.error, StreamBrokenError) and out.error.retryable
    assert asm.step is None  # the call is never final, so it never runs


# A missing tool-call id gets a generated one: `call_` + 24 for OpenAI, 9 alphanumerics
# (what vLLM with Mistral and Mistral's API accept) for compatible servers.
MISSING_IDS = chat(call(0, None, "f", '{"a": 1}'), call(1, None, "g", '{"b": 2}'))


def test_missing_ids_are_generated_unique_and_short_enough() -> None:
    _, asm = run_chat(MISSING_IDS)
    ids = [c[0] for c in calls_of(asm)]
    assert len(set(ids)) == 2
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", i) and len(i) <= 40 for i in ids)
    _, asm = run_chat(MISSING_IDS, id_style="short")
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", c[0]) for c in calls_of(asm))


def test_id_style_follows_the_base_url() -> None:
    assert OpenAIChatProvider("m", api_key="k").tool_id_style == "openai"
    assert OpenAIChatProvider("m", api_key="k", base_url="http://localhost:8000/v1").tool_id_style == "short"
    assert OpenAIChatProvider("m", api_key="k", base_url="http://x/v1", tool_id_style="openai").tool_id_style \
        == "openai"
    assert len({new_tool_id("short") for _ in range(200)}) == 200


# A chunk carrying {"error": …}: an error, classified by its type.
@pytest.mark.parametrize(("err", "retryable"), [
    ({"message": "The server had an error", "type": "server_error"}, True),
    ({"message": "Rate limit", "type": "requests", "code": "rate_limit_exceeded"}, True),
    ({"message": "Bad tool call", "type": "invalid_request_error", "code": "tool_use_failed"}, False),
    ("upstream failed", False),
])
def test_chat_error_chunk(err: object, retryable: bool) -> None:
    body = chat({"content": "par"}, finish=None, done=False) + b"data: " + json.dumps({"error": err}).encode() + b"\n\n"
    out, _ = run_chat(body)
    assert isinstance(out.error, ProviderStreamError) and out.error.retryable is retryable


def test_malformed_chat_chunk_is_a_broken_stream() -> None:
    out, _ = run_chat(b'data: {"id":"x","choices":[{"delta":{"con\n\n')
    assert isinstance(out.error, StreamBrokenError) and out.error.retryable


# -- Responses -------------------------------------------------------------------------------

def responses(*events: dict) -> bytes:  # type: ignore[type-arg]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


CREATED = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_q", "status": "in_progress"}}
COMPLETED = {"type": "response.completed", "sequence_number": 9,
             "response": {"id": "resp_q", "status": "completed", "output": [], "usage": {}}}
MESSAGE = [
    {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
     "item": {"id": "msg_q", "type": "message", "role": "assistant", "content": []}},
    {"type": "response.output_text.delta", "sequence_number": 2, "output_index": 0, "item_id": "msg_q",
     "content_index": 0, "delta": "Hi"},
]

# A top-level `error` event (the SDK yields it instead of raising), in both shapes seen: the
# documented flat one and OpenAI's nested one.
RESPONSES_ERROR_FLAT = responses(CREATED, *MESSAGE, {"type": "error", "sequence_number": 3,
                                                    "code": "server_error", "message": "boom", "param": None})
RESPONSES_ERROR_NESTED = responses(CREATED, {"type": "error", "sequence_number": 1, "error": {
    "type": "invalid_request_error", "code": "context_length_exceeded", "message": "too long"}})
RESPONSES_FAILED = responses(CREATED, {"type": "response.failed", "sequence_number": 1, "response": {
    "id": "resp_q", "status": "failed", "error": {"code": "server_error", "message": "failed"}}})


@pytest.mark.parametrize(("body", "message", "retryable"), [
    (RESPONSES_ERROR_FLAT, "boom", True), (RESPONSES_ERROR_NESTED, "too long", False),
    (RESPONSES_FAILED, "failed", True)], ids=["flat", "nested", "response.failed"])
def test_responses_error_events(body: bytes, message: str, retryable: bool) -> None:
    out = drive("openai-responses", [body])
    assert isinstance(out.error, ProviderStreamError)
    assert (out.error.message, out.error.retryable) == (message, retryable)


# No final event (response.completed / incomplete / failed): broken, even with a [DONE].
RESPONSES_NO_FINAL = responses(CREATED, *MESSAGE) + b"data: [DONE]\n\n"


def test_responses_without_final_event_is_broken() -> None:
    out = drive("openai-responses", [RESPONSES_NO_FINAL])
    assert isinstance(out.error, StreamBrokenError)
    assert not any(isinstance(e, BlockClosed) for e in out.events)


def test_responses_completed_ends_the_step() -> None:
    out = drive("openai-responses", [responses(CREATED, *MESSAGE, COMPLETED)])
    asm = assemble("openai-responses", out.events)
    assert asm.step is not None and asm.step.stop_reason == "end_turn"
    assert [b.text for b in asm.blocks if isinstance(b, TextBlock)] == ["Hi"]


# -- Anthropic -------------------------------------------------------------------------------

def anthropic_events(*payloads: dict) -> bytes:  # type: ignore[type-arg]
    return b"".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads)


_START = [{"type": "message_start", "message": {"id": "msg_q", "role": "assistant", "content": [],
                                                "usage": {"input_tokens": 5, "output_tokens": 1}}},
          {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
          {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}]
# An error after the 200: `event: error` with overloaded_error. Classified by the body's error
# type (retryable), not by the HTTP status.
ANTHROPIC_OVERLOADED_MIDSTREAM = anthropic_events(
    *_START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
# A clean close without message_stop.
ANTHROPIC_NO_MESSAGE_STOP = anthropic_events(
    *_START, {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})


def test_anthropic_error_event_mid_stream() -> None:
    out = drive("anthropic-messages", [ANTHROPIC_OVERLOADED_MIDSTREAM])
    assert isinstance(out.error, ProviderStreamError)
    assert (out.error.status, out.error.error_type, out.error.retryable) == (200, "overloaded_error", True)


def test_anthropic_missing_message_stop_is_broken() -> None:
    out = drive("anthropic-messages", [ANTHROPIC_NO_MESSAGE_STOP])
    assert isinstance(out.error, StreamBrokenError) and out.error.retryable


# -- every API: blocks close in the order they opened -------------------------------------

@pytest.mark.parametrize("c", cases(), ids=[c.id for c in cases()])
def test_blocks_close_in_opening_order(c) -> None:  # type: ignore[no-untyped-def]
    # Turn blocks are stored in seq order, so a block may not close before one opened earlier
    # (OpenRouter's Responses stream finishes the message before the reasoning it follows).
    out = drive(c.api, random_pieces(c.body, 7))
    opened = [e.key for e in out.events if isinstance(e, BlockOpened)]
    closed = [e.key for e in out.events if isinstance(e, BlockClosed)]
    assert closed == opened[: len(closed)]


def test_chat_reasoning_is_thinking_without_a_signature() -> None:
    _, asm = run_chat(chat({"reasoning_content": "Let me "}, {"reasoning_content": "think."}, {"content": "4"},
                           finish="stop"))
    [thinking] = [b for b in asm.blocks if isinstance(b, ThinkingBlock)]
    assert (thinking.thinking, thinking.signature) == ("Let me think.", "")
