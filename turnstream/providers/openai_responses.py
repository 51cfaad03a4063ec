"""OpenAI Responses API adapter (``openai-responses:<model>``): the request, and the provider
that streams it; the response's events are read by ``openai_responses_stream.StreamParser``.

Assistant blocks become input items: a ``text`` block a ``message``, a ``tool_use`` block a
``function_call``, a ``provider`` block the item it was made from (``data["input"]``),
replayed to the same origin only, except client-side call kinds turnstream never declares and
so cannot answer (``custom_tool_call``, ``local_shell_call``, ``shell_call``,
``apply_patch_call``, ``computer_call``), which are left out.

Reasoning items: a ``ThinkingBlock``'s ``signature`` is ``{"item": <the reasoning item exactly
as output_item.done carried it>, "next_id": <id of the item that followed it>}`` as compact
JSON (``openai_responses_stream.py``). The transcript sends thinking only to the model that
made it (``origin``) and never without a signature; this adapter replays the item verbatim
and only right before the block that followed it, to which it gives back its original item id
(the API pairs the two by id); a reasoning item with nothing after it is left out ("Item
'rs_…' of type 'reasoning' was provided without its required following item").
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson

from ..blocks import Attachment, Block, ProviderBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..content import IMAGE_TYPES, data_url
from . import http
from .base import ModelRequest, ProviderEvent, media_of, missing, user_parts
from .json_schema import openai_output
from .openai_chat import ToolIdStyle, arguments_text, endpoint
from .openai_responses_stream import StreamParser

log = logging.getLogger("turnstream.providers.openai_responses")

CLIENT_SIDE_ITEMS = frozenset({"custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
                               "computer_call"})
"""Call items a client must answer; turnstream declares no such tools, so it cannot."""


def reasoning_of(block: ThinkingBlock) -> tuple[dict[str, Any], str | None] | None:
    """The stored reasoning item and the id of its following item, if this block holds one."""
    try:
        sig = orjson.loads(block.signature)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(sig, dict) or not isinstance(sig.get("item"), dict):
        return None
    if sig["item"].get("type") != "reasoning":
        return None
    nxt = sig.get("next_id")
    return sig["item"], nxt if isinstance(nxt, str) and nxt else None


def _item_of(block: Block | str, item_id: str | None) -> dict[str, Any] | None:
    """The input item an assistant block becomes, or None when it has none."""
    if isinstance(block, TextBlock):
        if not block.text:
            return None
        if item_id:
            return {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}]}
        return {"type": "message", "role": "assistant", "content": block.text}
    if isinstance(block, ToolUseBlock):
        item: dict[str, Any] = {"type": "function_call", "call_id": block.tool_use_id, "name": block.name,
                                "arguments": arguments_text(block)}
        if item_id:
            item["id"] = item_id
        return item
    if isinstance(block, ProviderBlock):
        stored = block.data.get("input")
        if isinstance(stored, dict) and stored.get("type") and stored.get("type") not in CLIENT_SIDE_ITEMS:
            return stored
    return None


def _assistant_items(blocks: list[Block | str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(blocks):
        b = blocks[i]
        if isinstance(b, ThinkingBlock):
            found = reasoning_of(b)
            nxt = blocks[i + 1] if i + 1 < len(blocks) else None
            follower = None
            if found is not None and found[1] is not None and nxt is not None:
                follower = _item_of(nxt, found[1])
            if found is not None and follower is not None:
                out.append(found[0])
                out.append(follower)
                i += 2
                continue
            if found is not None:
                log.debug("left out reasoning item %s: the item after it is not in the transcript",
                          found[0].get("id"))
            i += 1
            continue
        item = _item_of(b, None)
        if item is not None:
            out.append(item)
        i += 1
    return out


def input_items(req: ModelRequest) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for m in req.messages:
        if m.role == "assistant":
            items.extend(_assistant_items(m.blocks))
            continue
        results, text, media = user_parts(m)
        items.extend({"type": "function_call_output", "call_id": r.tool_use_id, "output": _output(req, r)}
                     for r in results)
        if media:
            content = ([{"type": "input_text", "text": text}] if text else []) + [_input_media(req, a) for a in media]
            items.append({"type": "message", "role": "user", "content": content})
        elif text:
            # "type" is optional in the API; open-responses-server reads only items that carry it
            items.append({"type": "message", "role": "user", "content": text})
    return items


def _output(req: ModelRequest, r: ToolResultBlock) -> str | list[dict[str, Any]]:
    """A result's ``output``: its text, or a list of content parts when it returned images."""
    if not r.attachments:
        return r.content
    return [{"type": "input_text", "text": r.content or "(no text)"}, *(_input_media(req, a) for a in r.attachments)]


def _input_media(req: ModelRequest, ref: Attachment) -> dict[str, Any]:
    """An image as ``input_image``, a PDF as ``input_file``, both with their bytes inline."""
    data = media_of(req, ref)
    if data is None:
        return {"type": "input_text", "text": missing(ref)}
    url = data_url(ref.media_type, data)
    if ref.media_type in IMAGE_TYPES:
        return {"type": "input_image", "image_url": url}
    return {"type": "input_file", "filename": ref.name or "document.pdf", "file_data": url}


def request_body(req: ModelRequest, *, openai_native: bool = True) -> dict[str, Any]:
    """The Responses API request. ``openai_native``: the server is OpenAI's own; only then is
    ``prompt_cache_key`` sent (gateways such as LiteLLM refuse a field their backend lacks)."""
    body: dict[str, Any] = {"model": req.model, "input": input_items(req), "stream": True,
                            "max_output_tokens": req.max_tokens}
    if req.system:
        body["instructions"] = req.system
    if req.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.input_schema, "strict": False} for t in req.tools]
        if req.tool_choice == "none":
            body["tool_choice"] = "none"
    if req.output is not None:
        schema, strict = openai_output(req.output)
        body["text"] = {"format": {"type": "json_schema", "name": req.output.name, "schema": schema,
                                   "strict": strict}}
    if req.cache_key and openai_native:
        body["prompt_cache_key"] = req.cache_key
    return body


class OpenAIResponsesProvider:
    name = "openai-responses"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 tool_id_style: ToolIdStyle | None = None, headers: Mapping[str, str] | None = None) -> None:
        self.model = model
        root, self.openai_native, self.api_key, self._headers = endpoint(base_url, api_key, headers)
        self.url = root + "/responses"
        self.tool_id_style: ToolIdStyle = tool_id_style or ("openai" if self.openai_native else "short")
        self._client = http.ClientPool()

    @property
    def origin(self) -> str:
        return f"{self.name}:{self.model}"

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        return http.stream_events(self._client, self.url, self._headers,
                                  request_body(request, openai_native=self.openai_native),
                                  StreamParser(id_style=self.tool_id_style))

    async def aclose(self) -> None:
        await self._client.aclose()
