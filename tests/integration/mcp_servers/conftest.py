"""The test MCP server over streamable HTTP, for the MCP suites."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mock_provider import free_port
from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[3]
SERVER = ["-m", "tests.support.mcp_server"]


@pytest.fixture
def http_url() -> Iterator[str]:
    """The test MCP server over streamable HTTP (uvicorn), on a free port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, *SERVER, "http", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_for("the MCP HTTP server", up, 30)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
