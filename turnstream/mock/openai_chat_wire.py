"""OpenAI Chat Completions format for the mock provider: request view, frames, JSON answer.

Frames follow the live API byte for byte in shape: ``data: <compact JSON>\\n\\n`` chunks
(``id``, ``object``, ``created``, ``model``, ``service_tier``, ``system_fingerprint``,
``choices``, ``usage`` in that order; ``usage`` is ``null`` until the last chunk because
turnstream always asks for ``include_usage``), a first chunk with the role, tool calls whose
first fragment alone carries ``id``/``type``/``name``, a finish chunk with an empty delta, a
usage chunk with empty ``choices``, then ``data: [DONE]``. Scripted thinking is sent as
DeepSeek-style ``reasoning_content`` deltas (OpenAI itself sends none); redacted thinking is
not sent. ``truncate`` stops before the finish chunk: no finish_reason, no usage, no
``[DONE]``, which a client must treat as a broken stream. A request without ``"stream": true`` gets
``completion()``: the same step as one ``chat.completion`` object.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..providers.openai_chat import TOOL_IMAGES
from ..scenarios.engine import RequestView, StepScript, fragments, text_of

FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                  "stop_sequence": "stop", "refusal": "content_filter", "pause_turn": "stop"}


_TOOL_IMAGES = TOOL_IMAGES.split("{", 1)[0]


def request_view(body: dict[str, Any], *, steering: bool = False) -> RequestView:
    user_texts, rounds, last_input = 0, 0, ""
    results: list[str] = []
    prev = None
    for m in body.get("messages") or []:
        role = m.get("role")
        after_results, prev = prev == "tool", role
        # a tool's images (Chat cannot put them in a tool message) or, with steering, a message sent
        # while the turn ran: the round goes on
        if role == "user" and after_results and (steering or text_of(m.get("content")).startswith(_TOOL_IMAGES)):
            continue
        if role == "user":
            text = text_of(m.get("content"))
            user_texts += 1
            rounds, results, last_input = 0, [], text
        elif role == "assistant":
            rounds += 1
        elif role == "tool":
            results.append(text_of(m.get("content")))
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 8192
    return RequestView(user_texts=user_texts, rounds=rounds, results=results, last_input=last_input,
                       max_tokens=int(max_tokens),
                       tool_names=[(t.get("function") or {}).get("name", "")
                                   for t in body.get("tools") or []])


def _frame(payload: dict[str, Any] | str) -> bytes:
    if isinstance(payload, str):
        return f"data: {payload}\n\n".encode()
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def frames(script: StepScript, *, msg_id: str, model: str, truncate: bool = False) -> list[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, *,
              usage: dict[str, Any] | None = None) -> bytes:
        choices = [] if delta is None else [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return _frame({"id": msg_id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "service_tier": "default", "system_fingerprint": "fp_mock", "choices": choices,
                       "usage": usage})

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    size = script.fragment_size
    calls = 0
    for b in script.blocks:
        if b.type == "text":
            out.extend(chunk({"content": f}) for f in fragments(b.text, size) if f)
        elif b.type == "thinking":
            out.extend(chunk({"reasoning_content": f}) for f in fragments(b.text, size) if f)
        elif b.type == "tool_use":
            out.append(chunk({"tool_calls": [{"index": calls, "id": b.id, "type": "function",
                                              "function": {"name": b.name, "arguments": ""}}]}))
            out.extend(chunk({"tool_calls": [{"index": calls, "function": {"arguments": f}}]})
                       for f in fragments(b.arguments, size) if f)
            calls += 1
    if truncate:
        return out
    out.append(chunk({}, FINISH_REASONS.get(script.stop_reason, "stop")))
    out.append(chunk(None, usage=_usage(script)))
    out.append(_frame("[DONE]"))
    return out


def _usage(script: StepScript) -> dict[str, Any]:
    inp, outp = script.usage.get("input_tokens", 0), script.usage.get("output_tokens", 0)
    return {"prompt_tokens": inp, "completion_tokens": outp, "total_tokens": inp + outp,
            "prompt_tokens_details": {"cached_tokens": script.usage.get("cache_read_input_tokens", 0),
                                      "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def completion(script: StepScript, *, msg_id: str, model: str) -> dict[str, Any]:
    """The step as the non-streaming API answers it: one ``chat.completion`` object (text
    joined, thinking as ``reasoning_content``, ``content`` null when there is no text)."""
    text = "".join(b.text for b in script.blocks if b.type == "text")
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None,
                               "annotations": []}
    thinking = "".join(b.text for b in script.blocks if b.type == "thinking")
    if thinking:
        message["reasoning_content"] = thinking
    calls = [{"id": b.id, "type": "function", "function": {"name": b.name, "arguments": b.arguments}}
             for b in script.blocks if b.type == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "logprobs": None,
              "finish_reason": FINISH_REASONS.get(script.stop_reason, "stop")}
    return {"id": msg_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": _usage(script), "service_tier": "default",
            "system_fingerprint": "fp_mock"}


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": error_type}}


def error_frame(error_type: str, message: str) -> bytes:
    """An error inside a 200 stream, as OpenAI and OpenRouter send it (a data-only chunk)."""
    return _frame(error_body(error_type, message))


MALFORMED = (b'data: {"id":"chatcmpl-mock","object":"chat.completion.chunk",'
             b'"choices":[{"index":0,"delta":{"cont\n\n')
