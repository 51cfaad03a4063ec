"""The test MCP server over streamable HTTP, for the MCP suites."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp_http import HttpServer


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    """The test MCP server over streamable HTTP (uvicorn), on a free port."""
    server = HttpServer(tmp_path / "mcp-http-stderr.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_url(http_server: HttpServer) -> str:
    return http_server.url
