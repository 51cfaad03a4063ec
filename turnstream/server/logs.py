"""The server's logs on stderr, in one of two shapes.

* On a terminal (``TURNSTREAM_LOG_FORMAT=auto``, the default, when stderr is a TTY): short
  text lines (``12:03:04 warning  message``), no access log, and uvicorn's start-up chatter
  left out, so the address ``serve`` printed stays on the screen.
* Elsewhere (a file, a pipe, a container's log collector), or with ``json``: one JSON object
  per line, and an access log of every request with its status and duration.

``TURNSTREAM_ACCESS_LOG=on|off`` overrides the access log's default. Every line goes out
without API keys or query strings (``hardening.Redacting``). ``TURNSTREAM_LOG_LEVEL=DEBUG``
also logs the providers' requests, with keys redacted by the providers themselves
(``providers/http.py``).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .hardening import Redacting

access = logging.getLogger("turnstream.access")

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        for k, v in record.__dict__.items():
            if k not in _STANDARD and not k.startswith("_") and k != "color_message":
                doc[k] = v
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


class ConsoleFormatter(logging.Formatter):
    """``12:03:04 warning  message``; the logger's name only for other libraries' lines."""

    def __init__(self) -> None:
        super().__init__(datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.formatTime(record, self.datefmt)} {record.levelname.lower():<8} {record.getMessage()}"
        if not record.name.startswith("turnstream"):
            line += f"  ({record.name})"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _DenialNoise(logging.Filter):
    """uvicorn's websockets-sansio protocol logs "returned without completing handshake" after
    a handshake answered with an HTTP denial (401/403/404), which is what ws.py does on
    purpose; the client got its answer, so the line is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


@dataclass(frozen=True, slots=True)
class LogChoice:
    """What ``setup`` decided: the line format and whether requests are logged."""

    format: str
    access: bool
    console: bool


def choose(fmt: str, access_log: str, stream: TextIO) -> LogChoice:
    """Resolve ``auto`` for the format and the access log by whether ``stream`` is a terminal."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    resolved = fmt if fmt != "auto" else ("text" if tty else "json")
    logged = access_log == "on" or (access_log == "auto" and not tty)
    return LogChoice(resolved, logged, tty)


def setup(level: str = "INFO", fmt: str = "auto", access_log: str = "auto", stream: TextIO | None = None) -> LogChoice:
    out = stream or sys.stderr
    choice = choose(fmt, access_log, out)
    handler = logging.StreamHandler(out)
    inner = (JsonFormatter() if choice.format == "json" else
             ConsoleFormatter() if choice.console else
             logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setFormatter(Redacting(inner))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # On a terminal, uvicorn's "Started server process" and its like would push the address off
    # the screen; its warnings and errors still show.
    logging.getLogger("uvicorn.error").setLevel(logging.WARNING if choice.console else logging.NOTSET)
    logging.getLogger("uvicorn.error").addFilter(_DenialNoise())
    logging.getLogger("uvicorn.access").disabled = True
    # A Python warning (a library's UserWarning, say) would otherwise go to stderr as raw lines
    # among the JSON: it becomes a record of the logger ``py.warnings`` instead.
    logging.captureWarnings(True)
    access.disabled = not choice.access
    # The model calls (turnstream.http) and the MCP client's requests (httpx2) are logged at INFO;
    # where the server's own requests are not logged (a terminal, by default), neither are those.
    for name in ("turnstream.http", "httpx2"):
        logging.getLogger(name).setLevel(logging.NOTSET if choice.access else logging.WARNING)
    return choice


class AccessLog:
    """Logs method, path, status, duration and user of every HTTP request (not the query,
    which may hold a key)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or access.disabled:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            state = scope.get("state") or {}
            ms = round((time.perf_counter() - start) * 1000, 1)
            access.info("%s %s %d %.1f ms", scope["method"], scope["path"], status, ms,
                        extra={"method": scope["method"], "path": scope["path"], "status": status,
                               "ms": ms, "user": state.get("user")})
