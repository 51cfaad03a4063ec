"""The suite's own guards (tests/conftest.py, tests/support/network.py): a test sees none of the shell's keys or
settings, and cannot connect beyond loopback."""

from __future__ import annotations

import os
import socket

import httpx2 as httpx
import pytest

from tests.support.mock_provider import MockHandle
from tests.support.network import NetworkRefused


def test_the_environment_holds_no_keys_or_settings() -> None:
    leaked = [k for k in os.environ if k.startswith(("ANTHROPIC_", "OPENAI_"))
              or (k.startswith("TURNSTREAM_") and not k.startswith("TURNSTREAM_TEST_"))]
    assert leaked == []


def test_a_connection_beyond_loopback_is_refused() -> None:
    with socket.socket() as s, pytest.raises(NetworkRefused, match="only loopback"):
        s.connect(("203.0.113.7", 443))  # TEST-NET-3: never routable


def _causes(exc: BaseException | None) -> list[BaseException]:
    """An exception and everything it was raised from or grouped with."""
    out: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return out


async def test_a_provider_request_beyond_loopback_is_refused() -> None:
    """Through the HTTP stack the adapters use: refused by the guard, not by the network."""
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError) as err:
            await client.get("http://203.0.113.7/v1/messages")
    assert any(isinstance(e, NetworkRefused) for e in _causes(err.value))


def test_loopback_is_allowed(mock_provider: MockHandle) -> None:
    assert httpx.get(mock_provider.base_url + "/health", timeout=5).status_code == 200
