"""A stdio MCP server's standard error becomes ``turnstream serve``'s log records (server/child_stderr.py)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from turnstream.server.child_stderr import LONGEST, logged_stderr
from turnstream.server.hardening import Redacting
from turnstream.server.logs import JsonFormatter


class Collect(logging.Handler):
    """The records logged, from whatever thread; ``until`` waits for a number of them."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.changed:
            self.records.append(record)
            self.changed.notify_all()

    def until(self, n: int) -> list[logging.LogRecord]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.records) >= n, timeout=10), self.records
            return list(self.records)


@pytest.fixture
def collect() -> Iterator[Collect]:
    logger = logging.getLogger("turnstream.mcp.server")
    handler = Collect()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_each_line_a_child_writes_is_a_record_of_its_server(collect: Collect) -> None:
    err = logged_stderr("files")
    assert "turnstream.mcp.server" in err.name and "'files'" in err.name  # where a start-up error points
    script = ("import sys; w = sys.stderr.buffer.write; w(b'starting\\n\\n'); w(b'key ts_' + b'a' * 30 + b'\\r\\n');"
              f"w(b'x' * {LONGEST + 10} + b'\\n'); w(b'over\\rwritten \\x1b[2Jcleared\\n'); w(b'bad \\xff byte')")
    subprocess.run([sys.executable, "-c", script], stderr=err, check=True)
    err.close()  # the last line has no newline: it is logged at the end of the stream
    records = collect.until(6)
    messages = [r.getMessage() for r in records]
    assert len(messages) == 6, messages
    assert messages[0] == "[files] starting"  # the empty line is left out
    assert messages[1] == "[files] key ts_" + "a" * 30  # no \r
    assert messages[2] == "[files] " + "x" * LONGEST and messages[3] == "[files] " + "x" * 10  # a long line in pieces
    assert messages[4] == "[files] over\\x0dwritten \\x1b[2Jcleared"  # no terminal control reaches the log
    assert messages[5] == "[files] bad \ufffd byte"
    assert all(r.levelno == logging.INFO and r.__dict__["mcp_server"] == "files" for r in records)
    # through serve's formatter: one JSON object, the server named, the key redacted
    line = Redacting(JsonFormatter()).format(records[1])
    doc = json.loads(line)
    assert doc["logger"] == "turnstream.mcp.server" and doc["mcp_server"] == "files"
    assert doc["msg"] == "[files] key ts_***" and "aaaa" not in line
