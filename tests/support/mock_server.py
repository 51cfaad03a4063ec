"""The mock provider served over real HTTP from a background thread, for tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2 as httpx
import uvicorn

from turnstream.mock.server import MockProvider


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class MockHandle:
    def __init__(self, base_url: str, mock: MockProvider) -> None:
        self.base_url = base_url
        self.mock = mock

    def scenario(self, name: str, spec: dict[str, Any]) -> str:
        """Register a scenario; a request for model ``name`` plays it."""
        r = httpx.post(self.base_url + "/_mock/scenarios", json={name: spec})
        r.raise_for_status()
        return name

    def requests(self, model: str | None = None) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = httpx.get(self.base_url + "/_mock/requests").json()
        return [r["body"] for r in got if model is None or r["body"].get("model") == model]


@contextmanager
def running_mock() -> Iterator[MockHandle]:
    mock = MockProvider()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(mock.app(), host="127.0.0.1", port=port, log_level="error",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:  # wait for the socket to listen, bounded
        if time.monotonic() > deadline:
            raise RuntimeError("mock provider did not start")
        time.sleep(0.01)
    try:
        yield MockHandle(f"http://127.0.0.1:{port}", mock)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
