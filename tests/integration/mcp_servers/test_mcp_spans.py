"""The MCP spans a real ``turnstream serve`` exports over OTLP (issue 27, item 10): one client
span per MCP call (the SDK's own instrumentation adds none beside it), and connecting to an
older server, whose ``server/discover`` probe is refused as expected, leaves no error span."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.otlp import Receiver, attrs, spans_until
from tests.support.server import new_session, run_turn, scenario, server_errors, start_server

ROOT = Path(__file__).resolve().parents[3]
STATUS_ERROR = 2
"""``Status.STATUS_CODE_ERROR`` in OTLP."""
ADD = {"name": "add", "steps": [
    {"blocks": [{"type": "tool_use", "name": "new__add", "input": {"a": 1, "b": 2}},
                {"type": "tool_use", "name": "old__add", "input": {"a": 3, "b": 4}}]},
    {"blocks": [{"type": "text", "text": "{{results[0]}} {{last}}"}]}]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def test_one_span_per_mcp_call_and_no_error_span_for_an_expected_probe(receiver: Receiver, tmp_path: Path) -> None:
    server = {"command": sys.executable, "cwd": str(ROOT)}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "new": {**server, "args": ["-m", "tests.support.mcp_server", "stdio"]},
        "old": {**server, "args": ["-m", "tests.support.mcp_server", "stdio-2025"]}}}))
    srv = start_server(tmp_path, model=scenario(tmp_path / "add.json", ADD), env={
        "TURNSTREAM_MCP_CONFIG": str(config), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_METRICS_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "50"})
    try:
        with srv.client() as c:
            sid = new_session(c, toolset="none")
            for message in ("add", "again"):  # the second turn runs on connections made by the first
                events = run_turn(c, sid, message)
                assert events[-1].data["status"] == "complete", events[-1].data
        spans = spans_until(receiver, lambda got: sum(s.name == "invoke_agent" for s in got) == 2)
    finally:
        srv.stop()
    assert server_errors(srv) == []
    names = [s.name for s in spans]
    assert names.count("tools/call add") == 4, names  # two calls a turn, each one span
    assert not [n for n in names if n.startswith("MCP ")], names  # the SDK's own spans: none
    errors: list[Any] = [(s.name, attrs(s.attributes)) for s in spans if s.status.code == STATUS_ERROR]
    assert errors == [], errors
