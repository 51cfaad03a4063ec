"""Messages in the GenAI conventions' JSON form (``gen_ai.input.messages``,
``gen_ai.output.messages``), recorded only when content capture is on.

A message is ``{"role", "parts": [...]}``; parts are ``text``, ``reasoning``, ``tool_call``
(``id``, ``name``, ``arguments``) and ``tool_call_response`` (``id``, ``response``, in a
message of role ``tool``). Provider blocks (a server-side search, say) are left out.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..blocks import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..providers.base import BlockOpened, Delta, Message, ProviderEvent


def input_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        responses: list[dict[str, Any]] = []
        for b in m.blocks:
            if isinstance(b, str):
                parts.append({"type": "text", "content": b})
            elif isinstance(b, TextBlock):
                parts.append({"type": "text", "content": b.text})
            elif isinstance(b, ThinkingBlock):
                parts.append({"type": "reasoning", "content": b.thinking})
            elif isinstance(b, ToolUseBlock):
                parts.append({"type": "tool_call", "id": b.tool_use_id, "name": b.name, "arguments": b.input})
            elif isinstance(b, ToolResultBlock):
                responses.append({"type": "tool_call_response", "id": b.tool_use_id, "response": b.content})
        if responses:
            out.append({"role": "tool", "parts": responses})
        if parts:
            out.append({"role": m.role, "parts": parts})
    return out


class OutputCollector:
    """The model's answer in one step, gathered from its stream."""

    def __init__(self) -> None:
        self._parts: dict[int | str, dict[str, Any]] = {}
        self._json: dict[int | str, str] = {}

    def feed(self, ev: ProviderEvent) -> None:
        if isinstance(ev, BlockOpened):
            if ev.kind == "text":
                self._parts[ev.key] = {"type": "text", "content": ""}
            elif ev.kind == "thinking":
                self._parts[ev.key] = {"type": "reasoning", "content": ""}
            elif ev.kind == "tool_use":
                self._parts[ev.key] = {"type": "tool_call", "id": ev.tool_use_id, "name": ev.name,
                                       "arguments": dict(ev.data or {})}
                self._json[ev.key] = ""
        elif isinstance(ev, Delta) and ev.key in self._parts:
            part = self._parts[ev.key]
            if ev.kind in ("text", "thinking") and isinstance(ev.value, str):
                part["content"] += ev.value
            elif ev.kind == "input_json" and isinstance(ev.value, str):
                self._json[ev.key] += ev.value

    def messages(self, finish_reason: str) -> list[dict[str, Any]]:
        for key, text in self._json.items():
            if text:
                try:
                    self._parts[key]["arguments"] = orjson.loads(text)
                except orjson.JSONDecodeError:
                    self._parts[key]["arguments"] = text  # cut off: kept as it came
        return [{"role": "assistant", "parts": list(self._parts.values()), "finish_reason": finish_reason}]


__all__ = ["OutputCollector", "input_messages"]
