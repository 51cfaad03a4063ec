"""The Starlette application: routes, error handling, static files.

``create_app(state)`` takes an opened ``AppState`` (store, bus, turns); ``main.serve`` makes
one and runs the app under uvicorn. Routes (``routes_*.py``) are declared once on ``API``,
which also yields ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import logging
from importlib import metadata
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import TurnstreamError
from ..telemetry import telemetry_from_env
from . import (  # noqa: F401  (routes_* register)
    routes_agui,
    routes_audit,
    routes_blobs,
    routes_chat,
    routes_ipynb,
    routes_notebook,
    routes_notebook_files,
    routes_sessions,
    routes_turns,
    static_routes,
)
from .api import API, Call, Reply
from .errors import http_error_handler, turnstream_error_handler, unexpected_error_handler
from .hardening import SecurityHeaders
from .logs import AccessLog
from .models import Health, Readiness
from .state import STATIC_DIR, AppState
from .ws import session_socket

log = logging.getLogger("turnstream.server")

PLACEHOLDER = """<!doctype html><meta charset="utf-8"><title>turnstream</title>
<p>turnstream is running. The web UI is not installed in this build; the API is at
<a href="/openapi.json">/openapi.json</a>.</p>"""


READY_TIMEOUT = 2.0
"""Seconds ``/readyz`` gives the database to answer."""


@API.route("GET", "/healthz", summary="Liveness and store reachability", auth=False,
           replies={200: Reply("Healthy.", Health)})
async def healthz(call: Call) -> Response:
    state = call.state
    await state.store.get_session("healthz")  # a cheap read: fails when the database is gone
    gate = state.turns.admission
    admission = {"admitted": gate.admitted, "refused": gate.refused, "forced": gate.forced,
                 "waiting": gate.waiting, "running": gate.running, "limit": gate.limit}
    stats = state.bus.stats()
    return JSONResponse({"status": "ok", "store": type(state.store).__name__,
                         "live_turns": state.turns.live_count, "admission": admission, "bus": stats})


@API.route("GET", "/readyz", summary="Readiness for new turns (a load balancer's health check)", auth=False,
           replies={200: Reply("Takes new turns.", Readiness),
                    503: Reply("Takes none now: draining (SIGTERM), or the database is unreachable.", Readiness)})
async def readyz(call: Call) -> Response:
    state = call.state
    reason = None
    if state.turns.draining:
        reason = "draining"
    else:
        try:
            await asyncio.wait_for(state.store.get_session("readyz"), READY_TIMEOUT)
        except Exception:  # unreachable, failing or too slow: not ready, whatever the cause
            reason = "database unreachable"
    return JSONResponse({"ready": reason is None, "reason": reason}, status_code=503 if reason else 200,
                        headers={"Cache-Control": "no-store"})


class Guard:
    """Last line: an exception no handler took becomes a logged, clean JSON error (or, once
    a streamed response has started, a closed stream)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception as exc:
            if started:
                log.error("a streamed response failed on %s", scope.get("path"), exc_info=exc)
                return
            response = await unexpected_error_handler(Request(scope, receive), exc)
            await response(scope, receive, send)


def create_app(state: AppState) -> Starlette:
    try:
        version = metadata.version("turnstream")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "0"
    openapi = API.openapi(title="turnstream", version=version)

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi)

    static = state.settings.static_dir or STATIC_DIR

    async def index(request: Request) -> Response:
        page = static / "index.html"
        if page.is_file():
            return FileResponse(page, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(PLACEHOLDER)

    routes: list[BaseRoute] = [
        *API.routes(state),
        *static_routes.routes,  # what the web UI needs besides the API: /api/config, the Plotly bundle
        Route("/openapi.json", openapi_json, methods=["GET"]),
        WebSocketRoute("/ws/sessions/{session_id}", session_socket),
        Route("/", index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=static, check_dir=False), name="static"),
    ]
    handlers: dict[Any, Any] = {TurnstreamError: turnstream_error_handler, HTTPException: http_error_handler}
    middleware = [Middleware(AccessLog), Middleware(SecurityHeaders), Middleware(Guard)]
    telemetry = telemetry_from_env()
    if telemetry is not None:  # a server span per request, in the caller's trace (imported only when on)
        from ..telemetry.asgi import TraceRequests

        middleware.insert(0, Middleware(TraceRequests, telemetry=telemetry))
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.turnstream = state
    return app


__all__ = ["create_app"]
