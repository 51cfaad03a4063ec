"""``turnstream mock-provider``, the real command, as every suite reaches it: one process per
test session (the ``mock_provider`` fixture of ``tests/conftest.py``), its test hooks over
plain HTTP. Suites in-process and programs in other processes (the terminal chat, a server)
talk to the same one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx

from turnstream.providers import Provider

BIN = Path(sys.executable).parent / "turnstream"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class MockHandle:
    """A running mock provider: register scenarios, read back what it received."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def scenario(self, name: str, spec: dict[str, Any]) -> str:
        """Register a scenario; a request for model ``name`` (in any of the three wire
        formats) plays it. Returns ``name``."""
        r = httpx.post(self.base_url + "/_mock/scenarios", json={name: spec}, timeout=10)
        r.raise_for_status()
        return name

    def env(self) -> dict[str, str]:
        """The environment that points a ``turnstream serve`` (or chat) at this mock in every wire format."""
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": "test-key",
                "OPENAI_BASE_URL": self.base_url + "/v1", "OPENAI_API_KEY": "test-key"}

    def received(self) -> list[dict[str, Any]]:
        """Every request received (the last 500): ``{"path": …, "body": …}``."""
        got: list[dict[str, Any]] = httpx.get(self.base_url + "/_mock/requests", timeout=10).json()
        return got

    def requests(self, model: str | None = None) -> list[dict[str, Any]]:
        """The bodies received for ``model`` (``name`` or ``provider:name``), or all."""
        name = model.partition(":")[2] or model if model else None
        return [r["body"] for r in self.received() if name is None or r["body"].get("model") == name]


@contextmanager
def running_mock_provider() -> Iterator[MockHandle]:
    port = free_port()
    proc = subprocess.Popen([str(BIN), "mock-provider", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    handle = MockHandle(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 20
    try:
        while True:  # a separate process: poll until it answers, with a deadline
            try:
                httpx.get(handle.base_url + "/health", timeout=2).raise_for_status()
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("turnstream mock-provider did not start") from None
                time.sleep(0.05)
        yield handle
    finally:
        proc.terminate()
        proc.wait(timeout=10)


ProviderOf = Callable[[str, dict[str, Any]], Provider]
"""(wire format, scenario) -> an adapter that plays it from the mock (the ``provider_of`` fixture)."""


def adapter(kind: str, model: str, base_url: str) -> Provider:
    """An adapter of the wire format ``kind`` (``anthropic``, ``openai``, ``openai-responses``)
    asking the mock at ``base_url`` for ``model``."""
    from turnstream.providers.anthropic import AnthropicProvider
    from turnstream.providers.openai_chat import OpenAIChatProvider
    from turnstream.providers.openai_responses import OpenAIResponsesProvider

    if kind == "anthropic":
        return AnthropicProvider(model, api_key="k", base_url=base_url)
    if kind == "openai":
        return OpenAIChatProvider(model, api_key="k", base_url=base_url + "/v1")
    return OpenAIResponsesProvider(model, api_key="k", base_url=base_url + "/v1")
