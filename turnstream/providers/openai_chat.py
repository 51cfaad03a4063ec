"""OpenAI Chat Completions adapter (``openai:<model>``), for OpenAI and compatible servers.

Wire facts this module handles (PROVIDER-FACTS.md):

* tool calls arrive as ``choices[0].delta.tool_calls[]`` fragments keyed by ``index``, with
  ``id`` and ``name`` only in the first one. Ollama sends every parallel call at
  ``index: 0``: a fragment with an ``id`` different from the call open at that index starts
  a new call. Mistral omits ``index`` (its position in the list is used); Qwen repeats
  ``id: ""`` and GLM ``name: ""`` on continuations (empty means "not given").
* ``arguments`` may be a string (streamed as is), an object (serialised once here), or
  ``null`` / ``""`` (nothing; an empty call is ``{}``).
* a tool call is final on the step's end, never because its JSON happens to parse: blocks
  close when ``data: [DONE]`` arrives, or when the body ends cleanly after a
  ``finish_reason`` (some servers never send ``[DONE]``). A body that ends before any
  ``finish_reason`` is a broken stream.
* ``finish_reason``: ``tool_calls`` → ``tool_use``; ``stop`` with tool calls present →
  ``tool_use`` (servers that end tool calls that way); ``length`` → ``max_tokens``;
  ``content_filter`` → ``refusal``; ``stop`` after a ``delta.refusal`` → ``refusal``.
* a chunk carrying ``error`` (Groq ``event: error``, OpenRouter's error chunk) raises
  ``ProviderStreamError``, retryable only for server-side error types; so does a
  ``finish_reason`` that names an error (``error``, ``overloaded_error``: Portkey's translation
  of an Anthropic error event).
* usage: the chunk with ``usage`` (``stream_options.include_usage``; an empty ``choices``
  list at OpenAI, the finish chunk at Groq/Mistral). ``input_tokens`` is ``prompt_tokens``
  as the API counts it (cached tokens included), ``cache_read_input_tokens`` its cached part.
  A server that sends none (llama-cpp-python ignores ``include_usage``) ends the step with
  ``Usage.unknown``.

Decisions:

* Reasoning text (``delta.reasoning_content`` of DeepSeek/xAI/Z.ai, ``delta.reasoning`` of
  Groq/OpenRouter) becomes a ``thinking`` block without a signature: shown and stored, never
  sent back (the Chat format has no standard request field for it, and DeepSeek rejects
  ``reasoning_content`` in requests), so the transcript leaves it out.
* ``delta.refusal`` text becomes a text block (and the stop reason ``refusal``);
  ``delta.annotations`` (OpenRouter URL citations) become the text block's citations.
* Only choice 0 is read (turnstream never asks for ``n > 1``).
* Missing tool-call ids get a generated one: ``call_`` + 24 random characters for
  api.openai.com, 9 random alphanumerics for any other base URL (vLLM and Mistral reject
  other shapes, and every other server accepts them). ``tool_id_style`` overrides.
* ``max_completion_tokens`` for api.openai.com, ``max_tokens`` for compatible servers.

Why one module of this size: the request (messages, images and files, and the user message
that carries a tool's images, which a tool message cannot) and the stream parser are the two
halves of one wire format, and change together when a compatible server differs.
"""

from __future__ import annotations

import logging
import secrets
import string
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson

from ..blocks import Attachment, StopReason, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from ..content import IMAGE_TYPES, data_url
from ..errors import ProviderStreamError, StreamBrokenError, UsageError
from ..retry import RETRYABLE_ERROR_TYPES, is_retryable_status
from . import http
from .base import (
    BlockClosed,
    BlockOpened,
    Delta,
    Message,
    ModelRequest,
    ProviderEvent,
    StepEnded,
    media_of,
    missing,
    user_parts,
)
from .json_schema import openai_output

log = logging.getLogger("turnstream.providers.openai_chat")

OPENAI_BASE_URL = "https://api.openai.com/v1"
_ALNUM = string.ascii_letters + string.digits
# OpenAI-side error types and codes worth another try; everything else is the request's fault.
RETRYABLE_OPENAI_ERRORS = RETRYABLE_ERROR_TYPES | {
    "rate_limit_exceeded", "server_is_overloaded", "overloaded", "engine_overloaded", "slow_down",
}
ToolIdStyle = Literal["openai", "short"]


def new_tool_id(style: ToolIdStyle) -> str:
    """A fresh tool-call id: ``call_`` + 24 characters, or 9 alphanumerics (vLLM/Mistral)."""
    if style == "short":
        return "".join(secrets.choice(_ALNUM) for _ in range(9))
    return "call_" + "".join(secrets.choice(_ALNUM) for _ in range(24))


def is_openai_host(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.com")


def stream_error(err: Any, *, what: str = "error in the stream") -> ProviderStreamError:
    """An in-band error object (``{"message", "type", "code"}``, or a bare string) as an exception.

    Retryable when its type or code names a server-side error, or when its code is a
    retryable HTTP status (an int, or a digit string such as LiteLLM's ``"500"``)."""
    if isinstance(err, dict):
        message = str(err.get("message") or what)
        etype = err.get("type")
        code = err.get("code")
    else:
        message, etype, code = str(err or what), None, None
    status = http.status_of(code)
    kinds = {str(k) for k in (etype, code) if k}
    error_type = str(etype) if etype else (str(code) if code and status is None else None)
    retryable = bool(kinds & RETRYABLE_OPENAI_ERRORS) or (status is not None and is_retryable_status(status))
    return ProviderStreamError(message, status=status or 200, error_type=error_type, retryable=retryable,
                               api_code=str(code) if code and status is None else None)


def arguments_text(call: ToolUseBlock) -> str:
    """The arguments to send back: the model's own bytes when they are a JSON object (never
    re-encoded), else the parsed input serialised once."""
    raw = call.raw_input
    if raw and not call.input_error:
        try:
            if isinstance(orjson.loads(raw), dict):
                return raw
        except orjson.JSONDecodeError:
            pass
    return orjson.dumps(call.input).decode()


# -- request -------------------------------------------------------------------------------

def messages_to_wire(req: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if req.system:
        out.append({"role": "system", "content": req.system})
    for m in req.messages:
        if m.role == "assistant":
            out.extend(_assistant(m))
            continue
        results, text, media = user_parts(m)
        out.extend({"role": "tool", "tool_call_id": r.tool_use_id, "content": _tool_text(r)} for r in results)
        # A tool message carries text only: the images a tool returned follow in a user
        # message, each announced with the call it came from, before the user's own words.
        parts: list[dict[str, Any]] = []
        for r in results:
            if r.attachments:
                parts.append({"type": "text", "text": TOOL_IMAGES.format(id=r.tool_use_id)})
                parts.extend(_media_part(req, a) for a in r.attachments)
        if text:
            parts.append({"type": "text", "text": text})
        parts.extend(_media_part(req, a) for a in media)
        if parts == [{"type": "text", "text": text}]:
            out.append({"role": "user", "content": text})
        elif parts:
            out.append({"role": "user", "content": parts})
    return out


TOOL_IMAGES = "The images returned by tool call {id}:"
TOOL_IMAGES_NOTE = "(its images follow in the next user message)"


def _tool_text(r: ToolResultBlock) -> str:
    if not r.attachments:
        return r.content
    return f"{r.content}\n{TOOL_IMAGES_NOTE}" if r.content else TOOL_IMAGES_NOTE


def _media_part(req: ModelRequest, ref: Attachment) -> dict[str, Any]:
    """An image as an ``image_url`` data URL, a PDF as a ``file`` part with ``file_data``."""
    data = media_of(req, ref)
    if data is None:
        return {"type": "text", "text": missing(ref)}
    url = data_url(ref.media_type, data)
    if ref.media_type in IMAGE_TYPES:
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": ref.name or "document.pdf", "file_data": url}}


def _assistant(m: Message) -> list[dict[str, Any]]:
    texts = [b.text for b in m.blocks if isinstance(b, TextBlock) and b.text]
    calls = [b for b in m.blocks if isinstance(b, ToolUseBlock)]
    if not texts and not calls:
        return []  # thinking or provider-native blocks only: nothing this API can take
    # "" rather than null or no key when there is no text: llama-cpp-python's server answers
    # null with HTTP 500 and a missing key with an empty body (its template crashes), and
    # OpenAI, vLLM, Ollama, Mistral, Groq and LiteLLM accept "" beside tool_calls.
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        msg["tool_calls"] = [{"id": c.tool_use_id, "type": "function",
                              "function": {"name": c.name, "arguments": arguments_text(c)}} for c in calls]
    return [msg]


def request_body(req: ModelRequest, *, openai_native: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": req.model,
        "messages": messages_to_wire(req),
        "stream": True,
        "stream_options": {"include_usage": True},
        ("max_completion_tokens" if openai_native else "max_tokens"): req.max_tokens,
    }
    if req.tools:
        body["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": t.input_schema}} for t in req.tools]
        if req.tool_choice == "none":
            body["tool_choice"] = "none"
    if req.output is not None:
        schema, strict = openai_output(req.output)
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": req.output.name, "schema": schema, "strict": strict}}
    if req.cache_key and openai_native:
        body["prompt_cache_key"] = req.cache_key
    return body


# -- response ------------------------------------------------------------------------------

def _usage(u: dict[str, Any], into: Usage) -> bool:
    """Read a ``usage`` object into ``into``; False when it holds no token count."""
    if u.get("prompt_tokens") is None and u.get("completion_tokens") is None:
        return False
    if u.get("prompt_tokens") is not None:
        into.input_tokens = int(u["prompt_tokens"])
    if u.get("completion_tokens") is not None:
        into.output_tokens = int(u["completion_tokens"])
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = u.get("prompt_cache_hit_tokens")  # DeepSeek's own name
    if cached is not None:
        into.cache_read_input_tokens = int(cached)
    return True


class _Call:
    __slots__ = ("id", "key")

    def __init__(self, key: str, id_: str | None) -> None:
        self.key = key
        self.id = id_


class StreamParser:
    """Maps decoded Chat Completions chunks to neutral events; knows nothing of HTTP.

    ``parse()`` takes one SSE ``data`` payload; ``end_of_body()`` is called when the body
    ended without ``[DONE]``. Both return the events to pass on (a list, maybe empty).
    """

    __slots__ = ("_calls", "_got_usage", "_id_style", "_ids", "_n", "_open", "_reasoning", "_refused", "_text",
                 "done", "finish_raw", "usage")

    def __init__(self, *, id_style: ToolIdStyle = "openai") -> None:
        self.usage = Usage()
        self.finish_raw: str | None = None
        self.done = False
        self._id_style: ToolIdStyle = id_style
        self._open: dict[str, str] = {}  # key -> kind, in opening order (= seq order)
        self._text: str | None = None
        self._reasoning: str | None = None
        self._calls: dict[int, _Call] = {}
        self._ids: set[str] = set()
        self._n = 0
        self._refused = False
        self._got_usage = False

    # -- helpers ---------------------------------------------------------------------------

    def _key(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def _close(self, key: str | None, out: list[ProviderEvent]) -> None:
        if key is not None and self._open.pop(key, None) is not None:
            out.append(BlockClosed(key))

    def _fresh_id(self) -> str:
        while True:
            tid = new_tool_id(self._id_style)
            if tid not in self._ids:
                return tid

    def _text_key(self, out: list[ProviderEvent]) -> str:
        if self._text is None:
            self._close(self._reasoning, out)
            self._reasoning = None
            self._text = self._key("text")
            self._open[self._text] = "text"
            out.append(BlockOpened(self._text, "text"))
        return self._text

    # -- parsing ---------------------------------------------------------------------------

    def parse(self, data: str) -> list[ProviderEvent]:
        if data.strip() == "[DONE]":
            return self._finish("[DONE]")
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StreamBrokenError(f"malformed chunk in the stream: {data[:200]!r}", retryable=True) from exc
        if not isinstance(chunk, dict):
            raise StreamBrokenError(f"unexpected chunk in the stream: {data[:200]!r}", retryable=True)
        if chunk.get("error"):
            raise stream_error(chunk["error"])
        out: list[ProviderEvent] = []
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice, out)
        u = chunk.get("usage")
        if isinstance(u, dict) and _usage(u, self.usage):
            self._got_usage = True
        return out

    def _choice(self, choice: dict[str, Any], out: list[ProviderEvent]) -> None:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self._reasoning is None:
                self._close(self._text, out)
                self._text = None
                self._reasoning = self._key("thinking")
                self._open[self._reasoning] = "thinking"
                out.append(BlockOpened(self._reasoning, "thinking"))
            out.append(Delta(self._reasoning, "thinking", reasoning))
        for field in ("content", "refusal"):
            piece = delta.get(field)
            if isinstance(piece, str) and piece:
                if field == "refusal":
                    self._refused = True
                out.append(Delta(self._text_key(out), "text", piece))
        annotations = delta.get("annotations")
        if isinstance(annotations, list) and annotations:
            key = self._text_key(out)
            out.extend(Delta(key, "citation", a) for a in annotations)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for pos, tc in enumerate(calls):
                if isinstance(tc, dict):
                    self._tool_call(pos, tc, out)
        if choice.get("finish_reason"):
            self.finish_raw = str(choice["finish_reason"])

    def _tool_call(self, pos: int, tc: dict[str, Any], out: list[ProviderEvent]) -> None:
        index = tc.get("index")
        if not isinstance(index, int):
            index = pos  # Mistral sends no index: the position in this list
        fn = tc.get("function") or {}
        tid = tc.get("id") or None
        cur = self._calls.get(index)
        if cur is None or (tid is not None and cur.id is not None and tid != cur.id):
            # A new call: the first at this index, or (Ollama) a new id at a known index.
            for key in (self._text, self._reasoning):
                self._close(key, out)
            self._text = self._reasoning = None
            if tid is None or tid in self._ids:
                tid = self._fresh_id()
            self._ids.add(tid)
            cur = self._calls[index] = _Call(self._key("call"), tid)
            self._open[cur.key] = "tool_use"
            out.append(BlockOpened(cur.key, "tool_use", tool_use_id=tid, name=fn.get("name") or ""))
        args = fn.get("arguments")
        if isinstance(args, str):
            if args:
                out.append(Delta(cur.key, "input_json", args))
        elif isinstance(args, dict | list):
            out.append(Delta(cur.key, "input_json", orjson.dumps(args).decode()))  # encoded once, here

    def _stop_reason(self) -> StopReason:
        raw = self.finish_raw
        has_calls = bool(self._calls)
        if raw in ("tool_calls", "function_call"):
            return "tool_use" if has_calls else "end_turn"
        if raw == "length":
            return "max_tokens"
        if raw == "content_filter":
            return "refusal"
        if has_calls:
            return "tool_use"
        if raw not in ("stop", "eos", "end_turn", None):
            log.warning("unknown finish_reason %r, treated as stop", raw)
        return "refusal" if self._refused else "end_turn"

    def _finish(self, how: str) -> list[ProviderEvent]:
        if self.finish_raw is None:
            raise StreamBrokenError(f"the stream ended ({how}) before any finish_reason", retryable=True)
        if self.finish_raw == "error" or self.finish_raw.endswith("_error"):
            # A gateway's translation of an upstream error event (Portkey turns Anthropic's
            # overloaded_error into this finish_reason, after a half-streamed call): an error,
            # never a finished step whose calls could run.
            raise stream_error({"type": self.finish_raw, "message": f"the server ended the stream with "
                                                                    f"finish_reason {self.finish_raw!r}"})
        out: list[ProviderEvent] = [BlockClosed(k) for k in self._open]
        self._open.clear()
        self.done = True
        if not self._got_usage:
            self.usage.unknown = True  # llama-cpp-python ignores stream_options.include_usage
        out.append(StepEnded(self._stop_reason(), self.usage, self.finish_raw))
        return out

    def end_of_body(self) -> list[ProviderEvent]:
        """The body ended without ``[DONE]``: complete only if a finish_reason was seen."""
        if self.done:
            return []
        return self._finish("without [DONE]")


def endpoint(base_url: str | None, api_key: str | None,
             extra: Mapping[str, str] | None = None) -> tuple[str, bool, str, dict[str, str]]:
    """Where an OpenAI-format server is (``OPENAI_BASE_URL``), whether it is OpenAI's own, the key
    (``OPENAI_API_KEY``; local servers such as Ollama, vLLM or llama.cpp take any) and the headers
    (with ``extra``, default ``OPENAI_CUSTOM_HEADERS``)."""
    root = (base_url or http.env("OPENAI_BASE_URL", OPENAI_BASE_URL) or OPENAI_BASE_URL).rstrip("/")
    native = is_openai_host(root)
    key = api_key or http.env("OPENAI_API_KEY")
    if not key:
        if native:
            raise UsageError("OPENAI_API_KEY is not set (or pass api_key=)")
        key = "none"
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json", "accept": "text/event-stream",
               **http.custom_headers("OPENAI_CUSTOM_HEADERS", extra)}
    return root, native, key, headers


class OpenAIChatProvider:
    name = "openai"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 tool_id_style: ToolIdStyle | None = None, headers: Mapping[str, str] | None = None) -> None:
        self.model = model
        root, self.openai_native, self.api_key, self._headers = endpoint(base_url, api_key, headers)
        self.url = root + "/chat/completions"
        self.tool_id_style: ToolIdStyle = tool_id_style or ("openai" if self.openai_native else "short")
        self._client = http.ClientPool()

    @property
    def origin(self) -> str:
        return f"{self.name}:{self.model}"

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        body = request_body(request, openai_native=self.openai_native)
        return http.stream_events(self._client, self.url, self._headers, body,
                                  StreamParser(id_style=self.tool_id_style))

    async def aclose(self) -> None:
        await self._client.aclose()
