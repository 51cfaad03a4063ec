"""What keeps a shared server safe at the HTTP layer, below the routes.

* ``header_deadline_protocol``: uvicorn has a keep-alive timeout but none for a request whose
  headers never finish, so a client that sends a few header bytes now and then (slowloris)
  holds a connection for ever. This protocol (uvicorn's httptools one, with a timer) closes a
  connection whose request headers are not complete ``timeout`` seconds after the request
  began. Written here because uvicorn offers no such setting.
* ``SecurityHeaders``: every response says ``nosniff`` and may not be framed; the web UI's
  pages get a Content-Security-Policy that allows scripts, styles, images and connections from
  the server itself only (no inline script, no eval, no other origin), so that notebook output
  or a model's answer rendered in the page cannot run script or send data elsewhere.
* ``Redacting``: a log formatter that takes API keys and query strings out of every line it
  writes, tracebacks and extra fields included (uvicorn logs a WebSocket's path with its
  query; a URL may carry a key).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
"""``style-src 'unsafe-inline'``: Plotly sets styles on the elements it draws (inline styles
cannot run script). Nothing else is relaxed."""

_ALWAYS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"referrer-policy", b"no-referrer")]
_PAGE = [(b"content-security-policy", CSP.encode())]


class SecurityHeaders:
    """ASGI middleware adding the headers above (the CSP to HTML and script responses)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                kind = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                extra = _ALWAYS + (_PAGE if kind.startswith((b"text/html", b"text/javascript")) else [])
                headers += [(k, v) for k, v in extra if k not in names]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def header_deadline_protocol(timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with a deadline on each request's headers (see above)."""
    from uvicorn.config import Config
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    class HeaderDeadlineProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None

        def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                     _loop: asyncio.AbstractEventLoop | None = None) -> None:
            super().__init__(config, server_state, app_state, _loop)
            # The loop makes a protocol for each accepted connection and hands it the connection
            # at once, so the first request's deadline runs from here.
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineProtocol


_KEY = re.compile(r"\bts_[A-Za-z0-9_-]{16,}")
_QUERY = re.compile(r"(/[^\s?\"'\\]*)\?[^\s\"'\\]*")
"""A path and its query string, stopping at a quote or a backslash (so that a JSON line stays JSON)."""


def redact(text: str) -> str:
    """``text`` without API keys and without the query strings of the paths in it."""
    return _QUERY.sub(r"\1?…", _KEY.sub("ts_***", text))


class Redacting(logging.Formatter):
    """Formats with ``inner``, then redacts the whole line."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record))


__all__ = ["CSP", "Redacting", "SecurityHeaders", "header_deadline_protocol", "redact"]
