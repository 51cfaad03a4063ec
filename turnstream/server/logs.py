"""Structured logs: one JSON object per line on stderr (``TURNSTREAM_LOG_FORMAT=text`` for
plain lines), and an access log of every request with its status and duration. Every line
goes out without API keys or query strings (``hardening.Redacting``).

``TURNSTREAM_LOG_LEVEL=DEBUG`` also logs the providers' requests, with keys redacted by
the providers themselves (``providers/http.py``).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

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


class _DenialNoise(logging.Filter):
    """uvicorn's websockets-sansio protocol logs "returned without completing handshake" after
    a handshake answered with an HTTP denial (401/403/404), which is what ws.py does on
    purpose; the client got its answer, so the line is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


def setup(level: str = "INFO", fmt: str = "json") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacting(JsonFormatter() if fmt == "json" else
                                   logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.error").addFilter(_DenialNoise())
    logging.getLogger("uvicorn.access").disabled = True


class AccessLog:
    """Logs method, path, status, duration and user of every HTTP request (not the query,
    which may hold a key)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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
            access.info("%s %s %d", scope["method"], scope["path"], status,
                        extra={"method": scope["method"], "path": scope["path"], "status": status,
                               "ms": round((time.perf_counter() - start) * 1000, 1), "user": state.get("user")})
