"""Anthropic Messages format for the mock provider: request view, SSE frames, JSON message.

Frames match the live API: ``event: <type>\\ndata: <compact JSON>\\n\\n``, with a ``ping``
after ``message_start``, the first ``input_json_delta`` empty, and ``message_delta``
carrying the stop reason and cumulative usage before ``message_stop``. A request without
``"stream": true`` gets ``message()``: the same step as one ``message`` object.
"""

from __future__ import annotations

import json
from typing import Any

from ..scenarios.engine import RequestView, StepScript, fragments, text_of


def request_view(body: dict[str, Any], *, steering: bool = False) -> RequestView:
    messages = body.get("messages") or []
    user_texts, rounds, results, last_input = 0, 0, [], ""
    for m in messages:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if m.get("role") == "user":
            texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
            for b in blocks:
                if b.get("type") == "tool_result":
                    results.append(text_of(b.get("content")))
            # with steering, text beside tool results was sent while the turn ran: the round goes on
            if texts and not (steering and any(b.get("type") == "tool_result" for b in blocks)):
                user_texts += 1
                rounds, results = 0, []
                last_input = "".join(texts)
        elif m.get("role") == "assistant":
            rounds += 1
    return RequestView(user_texts=user_texts, rounds=rounds, results=results, last_input=last_input,
                       max_tokens=int(body.get("max_tokens") or 8192),
                       tool_names=[t.get("name", "") for t in body.get("tools") or []])


def _frame(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


def frames(script: StepScript, *, msg_id: str, model: str, truncate: bool = False) -> list[bytes]:
    out = [_frame({"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": script.usage.get("input_tokens", 0),
                  "cache_creation_input_tokens": script.usage.get("cache_creation_input_tokens", 0),
                  "cache_read_input_tokens": script.usage.get("cache_read_input_tokens", 0), "output_tokens": 1}}}),
           _frame({"type": "ping"})]
    size = script.fragment_size
    for i, b in enumerate(script.blocks):
        if b.type == "text":
            start = {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            out.append(_frame(start))
            for f in fragments(b.text, size):
                out.append(_frame({"type": "content_block_delta", "index": i,
                                   "delta": {"type": "text_delta", "text": f}}))
        elif b.type == "thinking":
            out.append(_frame({"type": "content_block_start", "index": i,
                               "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            for f in fragments(b.text, size):
                out.append(_frame({"type": "content_block_delta", "index": i,
                                   "delta": {"type": "thinking_delta", "thinking": f}}))
            out.append(_frame({"type": "content_block_delta", "index": i,
                               "delta": {"type": "signature_delta", "signature": b.signature}}))
        elif b.type == "redacted_thinking":
            out.append(_frame({"type": "content_block_start", "index": i,
                               "content_block": {"type": "redacted_thinking", "data": b.data}}))
        elif b.type == "tool_use":
            out.append(_frame({"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": b.id, "name": b.name, "input": {}}}))
            out.append(_frame({"type": "content_block_delta", "index": i,
                               "delta": {"type": "input_json_delta", "partial_json": ""}}))
            for f in fragments(b.arguments, size):
                if f:
                    out.append(_frame({"type": "content_block_delta", "index": i,
                                       "delta": {"type": "input_json_delta", "partial_json": f}}))
            if not b.complete:
                continue  # cut off by max_tokens: the live API sends no stop for it
        out.append(_frame({"type": "content_block_stop", "index": i}))
    out.append(_frame({"type": "message_delta", "delta": {"stop_reason": script.stop_reason, "stop_sequence": None},
                       "usage": {"output_tokens": script.usage.get("output_tokens", 0)}}))
    if not truncate:
        out.append(_frame({"type": "message_stop"}))
    return out


def parsed_input(arguments: str) -> dict[str, Any]:
    """Tool arguments as the object a non-streaming answer carries: ``{}`` when the text is not
    a JSON object (cut off by ``max_tokens``, or a scenario's invalid ``raw``)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def message(script: StepScript, *, msg_id: str, model: str) -> dict[str, Any]:
    """The step as the non-streaming API answers it: one ``message`` object."""
    content: list[dict[str, Any]] = []
    for b in script.blocks:
        if b.type == "text":
            content.append({"type": "text", "text": b.text})
        elif b.type == "thinking":
            content.append({"type": "thinking", "thinking": b.text, "signature": b.signature})
        elif b.type == "redacted_thinking":
            content.append({"type": "redacted_thinking", "data": b.data})
        elif b.type == "tool_use":
            content.append({"type": "tool_use", "id": b.id, "name": b.name, "input": parsed_input(b.arguments)})
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": script.stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": script.usage.get("input_tokens", 0),
                      "cache_creation_input_tokens": script.usage.get("cache_creation_input_tokens", 0),
                      "cache_read_input_tokens": script.usage.get("cache_read_input_tokens", 0),
                      "output_tokens": script.usage.get("output_tokens", 0)}}


def error_frame(error_type: str, message: str) -> bytes:
    return _frame({"type": "error", "error": {"type": error_type, "message": message}})


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}
