"""The HTTP client of a turnstream server's API (SPEC §7, §8): requests with the user's key,
SSE event streams read as they arrive and decoded into the objects of ``turnstream.events``,
and every failure as one clear ``RemoteError`` (a ``ServerError`` for an error status, a
``RemoteStreamBroken`` for a stream cut off after it started), never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2 as httpx

from .errors import InvalidValue, RemoteError, RemoteStreamBroken, ServerError
from .events import StreamEvent, decode
from .json_depth import too_deep
from .sse_decoder import SSEDecoder, SSEEvent
from .tools.tool import Tool

REQUEST_TIMEOUT = 30.0
STREAM_READ_TIMEOUT = 60.0


def _describe(status: int, message: str) -> str:
    if status == 401:
        return (f"the server refused the API key (401: {message}). Pass --key KEY or set TURNSTREAM_KEY; "
                "`turnstream serve` prints a login key and `turnstream users add NAME` makes one")
    if status == 404:
        return f"not found on the server (404): {message}"
    if status == 409:
        return f"conflict (409): {message}"
    if status == 422:
        return f"the server rejected the request (422): {message}"
    return f"the server answered {status}: {message}"


def _server_error(status: int, body: bytes, headers: httpx.Headers | None = None) -> ServerError:
    wait = headers.get("retry-after", "") if headers is not None else ""
    retry_after = int(wait) if wait.isdigit() else None
    try:
        data = None if too_deep(body) else json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        detail = data.get("detail")
        return ServerError(status, data["message"], _describe(status, data["message"]),
                           detail if isinstance(detail, list) else None, retry_after)
    text = body.decode("utf-8", "replace").strip()[:300] or "(no message)"
    return ServerError(status, text, _describe(status, text), retry_after=retry_after)


def _transport_message(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def split_server_url(url: str) -> tuple[str, str | None]:
    """The base URL, and the key when the URL carries one in its fragment (``…/#key=K``, as
    ``turnstream serve`` prints it)."""
    parts = urlsplit(url.strip())
    key = None
    if parts.fragment.startswith("key="):
        key = parts.fragment[4:] or None
    base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return base, key


# --- events -------------------------------------------------------------------------------


def decode_event(sse: SSEEvent) -> StreamEvent | None:
    """An SSE event of SPEC §8 as the event object the local loop would have made; None for
    an event this client cannot read (its data is not JSON, or does not fit its name)."""
    try:
        data = None if too_deep(sse.data) else json.loads(sse.data)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    turn_id, _, n_text = (sse.id or "").rpartition(":")
    try:
        return decode(sse.event, data, turn_id=turn_id, n=int(n_text) if n_text.isdigit() else 0)
    except InvalidValue:
        return None


def client_tool_spec(tool: Tool) -> dict[str, Any]:
    """A local tool as the ``client_tools`` entry of ``POST /api/sessions/{id}/turns``."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema,
            "requires_approval": tool.requires_approval}


# --- HTTP ---------------------------------------------------------------------------------


class RemoteAPI:
    """The few routes of SPEC §7 this client needs, with errors as ``RemoteError``."""

    def __init__(self, base_url: str, key: str, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url
        self._client = httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, transport=transport,
            timeout=httpx.Timeout(REQUEST_TIMEOUT, read=STREAM_READ_TIMEOUT))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            r = await self._client.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise RemoteError(f"cannot reach the server at {self.base_url}: {_transport_message(exc)}") from None
        if r.status_code >= 400:
            raise _server_error(r.status_code, r.content, r.headers)
        try:
            return r.json()
        except ValueError:
            raise RemoteError(f"the server's answer to {method} {path} is not JSON") from None

    async def post_message(self, path: str, body: dict[str, Any]) -> tuple[int, Any, httpx.Headers]:
        """POST ``body`` to a route that answers JSON or an event stream: the status, the JSON
        (None for a stream, which is closed unread: what it streams is read elsewhere) and the
        headers."""
        try:
            async with self._client.stream("POST", path, json=body,
                                           headers={"Accept": "text/event-stream"}) as r:
                if r.status_code >= 400:
                    raise _server_error(r.status_code, await r.aread(), r.headers)
                if r.headers.get("content-type", "").startswith("text/event-stream"):
                    return r.status_code, None, r.headers
                content = await r.aread()
        except httpx.TransportError as exc:
            raise RemoteError(f"cannot reach the server at {self.base_url}: {_transport_message(exc)}") from None
        try:
            return r.status_code, json.loads(content), r.headers
        except ValueError:
            raise RemoteError(f"the server's answer to POST {path} is not JSON") from None

    async def events(self, method: str, path: str, *, body: dict[str, Any] | None = None,
                     last_event_id: str | None = None,
                     on_headers: Callable[[httpx.Headers], None] | None = None) -> AsyncGenerator[SSEEvent, None]:
        """The SSE events of one response, as they arrive."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        started = False
        try:
            async with self._client.stream(method, path, json=body, headers=headers) as r:
                if r.status_code >= 400:
                    raise _server_error(r.status_code, await r.aread(), r.headers)
                if on_headers is not None:
                    on_headers(r.headers)
                started = True
                decoder = SSEDecoder()
                async for chunk in r.aiter_raw():
                    for ev in decoder.feed(chunk):
                        yield ev
        except httpx.TransportError as exc:
            if started:
                raise RemoteStreamBroken(f"the event stream broke: {_transport_message(exc)}") from None
            raise RemoteError(f"cannot reach the server at {self.base_url}: {_transport_message(exc)}") from None
