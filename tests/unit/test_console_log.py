"""On a terminal the server says requests are not logged; then no request is, the HTTP client's
lines for model calls included. Where the access log is on, they are."""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Iterator

import pytest

from turnstream.server.logs import setup


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    clients = {name: logging.getLogger(name).level for name in ("turnstream.http", "httpx2")}
    yield
    logging.captureWarnings(False)
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, client in clients.items():
        logging.getLogger(name).setLevel(client)


def model_call() -> None:
    logging.getLogger("turnstream.http").info(
        'HTTP Request: POST https://api.anthropic.com/v1/messages "HTTP/1.1 200 OK"')
    logging.getLogger("httpx2").info('HTTP Request: POST https://mcp.example.com/mcp "HTTP/1.1 200 OK"')


def test_a_terminal_shows_no_model_call_lines() -> None:
    out = Terminal()
    choice = setup("INFO", "auto", "auto", out)
    assert choice.console and not choice.access
    model_call()
    logging.getLogger("turnstream.x").warning("still shown")
    assert "api.anthropic.com" not in out.getvalue()
    assert "mcp.example.com" not in out.getvalue()
    assert "still shown" in out.getvalue()


def test_with_the_access_log_on_they_are_shown() -> None:
    out = Terminal()
    setup("INFO", "auto", "on", out)
    model_call()
    assert "api.anthropic.com" in out.getvalue()
    assert "mcp.example.com" in out.getvalue()


def test_a_python_warning_is_a_json_record_not_a_raw_line() -> None:
    out = io.StringIO()
    setup("INFO", "json", "auto", out)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("this library is old", UserWarning, stacklevel=1)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    doc = json.loads(lines[0])
    assert doc["logger"] == "py.warnings" and doc["level"] == "warning" and "this library is old" in doc["msg"]
