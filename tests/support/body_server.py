"""A local HTTP server that answers every POST with one recorded body, status and content
type, and counts the requests: for testing what an adapter does with a body over real HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.mock_provider import free_port


@dataclass
class BodyServer:
    base_url: str
    body: bytes
    status: int
    content_type: str
    requests: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    """Each request's headers (names in lower case)."""


@contextmanager
def serving(body: bytes, *, status: int = 200, content_type: str = "text/event-stream") -> Iterator[BodyServer]:
    port = free_port()
    state = BodyServer(f"http://127.0.0.1:{port}", body, status, content_type)

    async def answer(request: Request) -> Response:
        state.requests.append(request.url.path)
        state.headers.append(dict(request.headers))
        return Response(state.body, status_code=state.status, media_type=state.content_type)

    app = Starlette(routes=[Route("/{path:path}", answer, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:  # until the socket listens, bounded
        if time.monotonic() > deadline:
            raise RuntimeError("body server did not start")
        time.sleep(0.01)
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
