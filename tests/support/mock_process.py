"""``turnstream mock-provider`` as a separate process (what the end-to-end tests drive), and
its test hooks, over plain HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.mock_server import free_port

BIN = Path(sys.executable).parent / "turnstream"


class Mock:
    """A running ``turnstream mock-provider`` and its test hooks."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def register(self, name: str, spec: dict[str, Any]) -> str:
        """Register a scenario; returns the ``anthropic:`` model that plays it."""
        self._call("POST", "/_mock/scenarios", {name: spec})
        return f"anthropic:{name}"

    def requests(self, model: str) -> list[dict[str, Any]]:
        name = model.partition(":")[2]
        return [r["body"] for r in self._call("GET", "/_mock/requests") if r["body"].get("model") == name]


@contextmanager
def mock_process() -> Iterator[Mock]:
    port = free_port()
    proc = subprocess.Popen([str(BIN), "mock-provider", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Mock(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 20
    try:
        while True:  # the mock is a separate process: poll until it answers, with a deadline
            try:
                m._call("GET", "/health")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("turnstream mock-provider did not start") from None
                time.sleep(0.05)
        yield m
    finally:
        proc.terminate()
        proc.wait(timeout=10)
