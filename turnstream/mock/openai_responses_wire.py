"""OpenAI Responses format for the mock provider: request view, frames, JSON answer.

Frames follow the live API: ``event: <type>\\ndata: <compact JSON>\\n\\n`` with ``type`` and
a rising ``sequence_number`` first in every payload; ``response.created`` and
``response.in_progress``; per output item ``output_item.added``, its deltas and ``.done``
events, ``output_item.done``; then ``response.completed`` (or ``response.incomplete`` with
``incomplete_details.reason: max_output_tokens`` when the step was cut off, its cut item
left unfinished) holding the output and usage. No ``[DONE]``. Scripted thinking becomes a
reasoning item with one summary part, redacted thinking a reasoning item with only
``encrypted_content``. ``truncate`` leaves the final event out. An injected ``error`` event
carries no ``sequence_number`` (the frame is made without knowing its position). A request
without ``"stream": true`` gets ``response_object()``: the ``response`` that
``response.completed`` (or ``response.incomplete``) would have carried.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..scenarios.engine import RequestView, StepScript, fragments, text_of

_ASSISTANT_ITEMS = {"function_call", "reasoning", "web_search_call", "file_search_call", "computer_call",
                    "custom_tool_call", "local_shell_call", "mcp_call", "mcp_list_tools",
                    "image_generation_call", "code_interpreter_call", "mcp_approval_request",
                    "tool_search_call", "tool_search_output"}


def request_view(body: dict[str, Any], *, steering: bool = False) -> RequestView:
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    user_texts, rounds, last_input = 0, 0, ""
    results: list[str] = []
    in_round = False
    prev = None
    for item in items or []:
        if not isinstance(item, dict):
            continue
        itype, prev_type = item.get("type", "message"), prev
        prev = itype
        if steering and itype == "message" and item.get("role") == "user" and prev_type == "function_call_output":
            continue  # sent while the turn ran: the round goes on
        if itype == "message" and item.get("role") in ("user", "system", "developer"):
            in_round = False
            if item.get("role") == "user":
                user_texts += 1
                rounds, results, last_input = 0, [], text_of(item.get("content"))
        elif itype == "function_call_output":
            in_round = False
            results.append(text_of(item.get("output")))
        elif (itype == "message" and item.get("role") == "assistant") or itype in _ASSISTANT_ITEMS:
            if not in_round:
                rounds += 1
            in_round = True
    return RequestView(user_texts=user_texts, rounds=rounds, results=results, last_input=last_input,
                       max_tokens=int(body.get("max_output_tokens") or 8192),
                       tool_names=[str(t.get("name", "")) for t in body.get("tools") or []])


def _frame(payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


def frames(script: StepScript, *, msg_id: str, model: str, truncate: bool = False) -> list[bytes]:
    return _play(script, msg_id=msg_id, model=model, truncate=truncate)[0]


def response_object(script: StepScript, *, msg_id: str, model: str) -> dict[str, Any]:
    """The step as the non-streaming API answers it: the final ``response`` object."""
    return _play(script, msg_id=msg_id, model=model, truncate=False)[1]


def _play(script: StepScript, *, msg_id: str, model: str, truncate: bool) -> tuple[list[bytes], dict[str, Any]]:
    """The step's frames, and the final response object they end with."""
    created = int(time.time())
    resp_id = msg_id
    seq = 0
    out: list[bytes] = []

    def emit(type_: str, **fields: Any) -> None:
        nonlocal seq
        out.append(_frame({"type": type_, "sequence_number": seq, **fields}))
        seq += 1

    def response(status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
                 incomplete: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"id": resp_id, "object": "response", "created_at": created, "status": status,
                "background": False, "error": None, "incomplete_details": incomplete, "instructions": None,
                "max_output_tokens": None,
                "model": model, "output": output, "parallel_tool_calls": True, "previous_response_id": None,
                "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": 1.0,
                "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
                "truncation": "disabled", "usage": usage, "user": None, "metadata": {}}

    emit("response.created", response=response("in_progress", [], None))
    emit("response.in_progress", response=response("in_progress", [], None))
    size = script.fragment_size
    done_items: list[dict[str, Any]] = []
    suffix = resp_id.removeprefix("resp_")
    for i, b in enumerate(script.blocks):
        if b.type == "text":
            item_id = f"msg_{suffix}{i:02d}"
            emit("response.output_item.added", output_index=i, item={"id": item_id, "type": "message",
                 "status": "in_progress", "content": [], "role": "assistant"})
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            emit("response.content_part.added", item_id=item_id, output_index=i, content_index=0, part=part)
            for f in fragments(b.text, size):
                if f:
                    emit("response.output_text.delta", item_id=item_id, output_index=i, content_index=0,
                         delta=f, logprobs=[])
            emit("response.output_text.done", item_id=item_id, output_index=i, content_index=0, text=b.text,
                 logprobs=[])
            part = {**part, "text": b.text}
            emit("response.content_part.done", item_id=item_id, output_index=i, content_index=0, part=part)
            item = {"id": item_id, "type": "message", "status": "completed", "content": [part],
                    "role": "assistant"}
        elif b.type in ("thinking", "redacted_thinking"):
            item_id = f"rs_{suffix}{i:02d}"
            emit("response.output_item.added", output_index=i, item={"id": item_id, "type": "reasoning",
                                                                     "summary": []})
            summary: list[dict[str, Any]] = []
            if b.type == "thinking":
                emit("response.reasoning_summary_part.added", item_id=item_id, output_index=i,
                     summary_index=0, part={"type": "summary_text", "text": ""})
                for f in fragments(b.text, size):
                    if f:
                        emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=i,
                             summary_index=0, delta=f)
                emit("response.reasoning_summary_text.done", item_id=item_id, output_index=i, summary_index=0,
                     text=b.text)
                summary = [{"type": "summary_text", "text": b.text}]
                emit("response.reasoning_summary_part.done", item_id=item_id, output_index=i, summary_index=0,
                     part=summary[0])
            item = {"id": item_id, "type": "reasoning", "summary": summary}
            if b.type == "redacted_thinking":
                item["encrypted_content"] = b.data
        elif b.type == "tool_use":
            item_id = f"fc_{suffix}{i:02d}"
            emit("response.output_item.added", output_index=i, item={
                "id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": b.id, "name": b.name})
            for f in fragments(b.arguments, size):
                if f:
                    emit("response.function_call_arguments.delta", item_id=item_id, output_index=i, delta=f)
            if not b.complete:
                done_items.append({"id": item_id, "type": "function_call", "status": "incomplete",
                                   "arguments": b.arguments, "call_id": b.id, "name": b.name})
                continue  # cut off by the output limit: no .done events
            emit("response.function_call_arguments.done", item_id=item_id, output_index=i,
                 arguments=b.arguments)
            item = {"id": item_id, "type": "function_call", "status": "completed", "arguments": b.arguments,
                    "call_id": b.id, "name": b.name}
        else:
            continue
        emit("response.output_item.done", output_index=i, item=item)
        done_items.append(item)
    inp, outp = script.usage.get("input_tokens", 0), script.usage.get("output_tokens", 0)
    usage = {"input_tokens": inp,
             "input_tokens_details": {"cached_tokens": script.usage.get("cache_read_input_tokens", 0)},
             "output_tokens": outp, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": inp + outp}
    if script.stop_reason == "max_tokens":
        final = response("incomplete", done_items, usage, {"reason": "max_output_tokens"})
        if not truncate:
            emit("response.incomplete", response=final)
    else:
        final = response("completed", done_items, usage)
        if not truncate:
            emit("response.completed", response=final)
    return out, final


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": error_type}}


def error_frame(error_type: str, message: str) -> bytes:
    """A top-level ``error`` event inside a 200 stream (the SDK yields it rather than raising)."""
    return _frame({"type": "error", "error": {"type": error_type, "code": error_type, "message": message,
                                              "param": None}})


MALFORMED = (b'event: response.output_text.delta\n'
             b'data: {"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_\n\n')
