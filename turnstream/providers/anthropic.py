"""Anthropic Messages API adapter (wire format ↔ neutral events).

Raw HTTP (httpx) rather than the ``anthropic`` SDK: the SDK's stream accumulator re-parses
the whole tool-input buffer on every delta and validates every event with pydantic, which
costs 8× the floor on ``make bench`` (RESULTS.md in the shared bench); here each SSE
payload is parsed once with orjson and mapped to a neutral event.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import orjson

from ..blocks import (
    Attachment,
    ProviderBlock,
    RedactedThinkingBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserBlock,
)
from ..content import IMAGE_TYPES
from ..errors import ProviderStreamError, StreamBrokenError, UsageError
from ..retry import RETRYABLE_ERROR_TYPES
from . import http
from .base import BlockClosed, BlockOpened, Delta, ModelRequest, ProviderEvent, StepEnded, media_of, missing
from .json_schema import anthropic_output

log = logging.getLogger("turnstream.providers.anthropic")

API_VERSION = "2023-06-01"

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "max_tokens",
}


def map_stop_reason(raw: str | None) -> StopReason:
    if raw is None:
        return "end_turn"
    mapped = STOP_REASONS.get(raw)
    if mapped is None:
        log.warning("unknown Anthropic stop_reason %r, treated as end_turn", raw)
        return "end_turn"
    return mapped


def _usage(u: dict[str, Any] | None, into: Usage) -> bool:
    """Read a ``usage`` object into ``into``; False when there is none."""
    if not u:
        return False
    if u.get("input_tokens") is not None:
        into.input_tokens = int(u["input_tokens"])
    if u.get("output_tokens") is not None:
        into.output_tokens = int(u["output_tokens"])
    if u.get("cache_read_input_tokens") is not None:
        into.cache_read_input_tokens = int(u["cache_read_input_tokens"])
    if u.get("cache_creation_input_tokens") is not None:
        into.cache_creation_input_tokens = int(u["cache_creation_input_tokens"])
    return True


# -- request -------------------------------------------------------------------------------

def media_block(req: ModelRequest, ref: Attachment) -> dict[str, Any]:
    """An image (``image``) or a PDF (``document``) as a base64 content block."""
    data = media_of(req, ref)
    if data is None:
        return {"type": "text", "text": missing(ref)}
    kind = "image" if ref.media_type in IMAGE_TYPES else "document"
    return {"type": kind, "source": {"type": "base64", "media_type": ref.media_type,
                                     "data": base64.b64encode(data).decode()}}


def block_to_wire(b: Any, req: ModelRequest) -> list[dict[str, Any]]:
    if isinstance(b, str):
        return [{"type": "text", "text": b}]
    if isinstance(b, TextBlock):
        return [{"type": "text", "text": b.text}]
    if isinstance(b, UserBlock):
        return [*(media_block(req, a) for a in b.attachments), *([{"type": "text", "text": b.text}] if b.text else [])]
    if isinstance(b, ToolUseBlock):
        return [{"type": "tool_use", "id": b.tool_use_id, "name": b.name, "input": b.input}]
    if isinstance(b, ToolResultBlock):
        content: str | list[dict[str, Any]] = b.content
        if b.attachments:
            content = [{"type": "text", "text": b.content or "(no text)"},
                       *(media_block(req, a) for a in b.attachments)]
        d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_use_id, "content": content}
        if b.is_error:
            d["is_error"] = True
        return [d]
    if isinstance(b, ThinkingBlock):
        return [{"type": "thinking", "thinking": b.thinking, "signature": b.signature}]
    if isinstance(b, RedactedThinkingBlock):
        return [{"type": "redacted_thinking", "data": b.data}]
    if isinstance(b, ProviderBlock):
        return [{k: v for k, v in b.data.items() if k != "input_raw"}]
    raise TypeError(f"cannot send {type(b).__name__} to Anthropic")


def messages_to_wire(req: ModelRequest) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": [w for b in m.blocks for w in block_to_wire(b, req)]} for m in req.messages]


CACHE = {"type": "ephemeral"}
UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
"""Blocks that may not carry ``cache_control`` (a breakpoint goes on the block before them)."""


def request_body(req: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": req.model,
        "max_tokens": req.max_tokens,
        "messages": messages_to_wire(req),
        "stream": True,
    }
    if req.system:
        body["system"] = [{"type": "text", "text": req.system, "cache_control": CACHE}]
    if req.tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                         for t in req.tools]
        body["tools"][-1]["cache_control"] = CACHE
        if req.tool_choice == "none":
            body["tool_choice"] = {"type": "none"}
    if req.thinking_budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": req.thinking_budget}
    if req.output is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": anthropic_output(req.output)}}
    mark_conversation(body["messages"])
    return body


def mark_conversation(messages: list[dict[str, Any]]) -> None:
    """Prompt-cache breakpoints on the conversation (the request's third and fourth, after
    the tools and the system prompt): the last block of the last message, which caches
    everything up to it for the next step, and the last block of the user message before
    it, where the previous step put its own, so that this step reads what that one wrote
    even when more than 20 blocks came in between (the API looks back 20 blocks at most)."""
    marked = 0
    for m in reversed(messages):
        if marked == 2:
            return
        if marked == 1 and m["role"] != "user":
            continue
        for b in reversed(m["content"]):
            if b.get("type") not in UNCACHEABLE and not (b.get("type") == "text" and not b.get("text")):
                b["cache_control"] = CACHE
                marked += 1
                break


# -- response ------------------------------------------------------------------------------

class StreamParser:
    """Maps decoded Anthropic SSE payloads to neutral events; knows nothing of HTTP."""

    __slots__ = ("_got_usage", "_stop_raw", "done", "usage")

    def __init__(self) -> None:
        self.usage = Usage()
        self._stop_raw: str | None = None
        self.done = False
        self._got_usage = False

    def parse(self, data: str) -> Sequence[ProviderEvent]:
        try:
            ev = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StreamBrokenError(f"malformed event in the stream: {data[:200]!r}", retryable=True) from exc
        t = ev.get("type") if isinstance(ev, dict) else None
        if t == "content_block_delta":
            d = ev["delta"]
            dt = d.get("type")
            if dt == "text_delta":
                return (Delta(ev["index"], "text", d["text"]),)
            if dt == "input_json_delta":
                return (Delta(ev["index"], "input_json", d.get("partial_json") or ""),)
            if dt == "thinking_delta":
                return (Delta(ev["index"], "thinking", d["thinking"]),)
            if dt == "signature_delta":
                return (Delta(ev["index"], "signature", d["signature"]),)
            if dt == "citations_delta":
                return (Delta(ev["index"], "citation", d.get("citation")),)
            log.debug("ignored delta type %r", dt)
            return ()
        if t == "content_block_start":
            return self._block_start(ev["index"], ev["content_block"])
        if t == "content_block_stop":
            return (BlockClosed(ev["index"]),)
        if t == "message_start":
            msg = ev.get("message") or {}
            self._got_usage = _usage(msg.get("usage"), self.usage)
            self._stop_raw = msg.get("stop_reason")
            content = msg.get("content") or []
            out: list[ProviderEvent] = []
            for i, cb in enumerate(content):  # a continuation may arrive pre-filled
                key = f"pre{i}"
                out.extend(self._block_start(key, cb))
                out.append(BlockClosed(key))
            return out
        if t == "message_delta":
            delta = ev.get("delta") or {}
            if delta.get("stop_reason") is not None:
                self._stop_raw = delta["stop_reason"]
            if _usage(ev.get("usage"), self.usage):
                self._got_usage = True
            return ()
        if t == "message_stop":
            self.done = True
            if not self._got_usage:
                self.usage.unknown = True
            return (StepEnded(map_stop_reason(self._stop_raw), self.usage, self._stop_raw),)
        if t == "error":
            err = ev.get("error") or {}
            etype = err.get("type")
            raise ProviderStreamError(str(err.get("message") or "error event in the stream"), status=200,
                                      error_type=etype, retryable=etype in RETRYABLE_ERROR_TYPES)
        return ()  # ping and event types this version does not know

    def end_of_body(self) -> Sequence[ProviderEvent]:
        if not self.done:
            raise StreamBrokenError("the stream ended without message_stop", retryable=True)
        return ()

    def _block_start(self, key: int | str, cb: dict[str, Any]) -> Sequence[ProviderEvent]:
        kind = cb.get("type")
        if kind == "text":
            opened = BlockOpened(key, "text")
            if cb.get("text"):
                return (opened, Delta(key, "text", cb["text"]))
            return (opened,)
        if kind == "thinking":
            evs: list[ProviderEvent] = [BlockOpened(key, "thinking")]
            if cb.get("thinking"):
                evs.append(Delta(key, "thinking", cb["thinking"]))
            if cb.get("signature"):
                evs.append(Delta(key, "signature", cb["signature"]))
            return evs
        if kind == "redacted_thinking":
            return (BlockOpened(key, "redacted_thinking", data={"data": cb.get("data", "")}),)
        if kind == "tool_use":
            data = {"input": cb["input"]} if cb.get("input") else None
            return (BlockOpened(key, "tool_use", tool_use_id=cb.get("id"), name=cb.get("name"), data=data),)
        return (BlockOpened(key, "provider", data=dict(cb)),)


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        """``headers``: added to every request (default: ``ANTHROPIC_CUSTOM_HEADERS``)."""
        self.model = model
        self.api_key = api_key or http.env("ANTHROPIC_API_KEY")
        if not self.api_key:
            raise UsageError("ANTHROPIC_API_KEY is not set (or pass api_key=)")
        root = (base_url or http.env("ANTHROPIC_BASE_URL", "https://api.anthropic.com") or "").rstrip("/")
        self.url = root + "/v1/messages"
        self._client = http.ClientPool()
        self._headers = {"x-api-key": self.api_key, "anthropic-version": API_VERSION,
                         "content-type": "application/json", "accept": "text/event-stream",
                         **http.custom_headers("ANTHROPIC_CUSTOM_HEADERS", headers)}

    @property
    def origin(self) -> str:
        return f"{self.name}:{self.model}"

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        return http.stream_events(self._client, self.url, self._headers, request_body(request), StreamParser())

    async def aclose(self) -> None:
        await self._client.aclose()
