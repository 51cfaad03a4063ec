"""A real ``turnstream serve`` per test module (SQLite in a temporary directory), and the
scenarios its sessions play (each session picks one as its ``model``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server.harness import Server, add_user, scenario, start_server

LONG_TEXT = " ".join(f"word{i}" for i in range(240))

SCENARIOS: dict[str, dict[str, Any]] = {
    "chain": {"name": "chain", "fragment_size": 4, "steps": [
        {"blocks": [{"type": "text", "text": "Adding first."},
                    {"type": "tool_use", "name": "calculator", "input": {"expression": "2+3"}}]},
        {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "{{last}}*10"}}]},
        {"blocks": [{"type": "text", "text": "The result is {{last}}."}]}]},
    "client": {"name": "client", "fragment_size": 5, "steps": [
        {"blocks": [{"type": "text", "text": "Let me ask your browser."},
                    {"type": "tool_use", "name": "get_location", "input": {"precision": "city"}}]},
        {"blocks": [{"type": "text", "text": "You are in {{last}}."}]}]},
    "parallel": {"name": "parallel", "fragment_size": 5, "steps": [
        {"blocks": [{"type": "tool_use", "name": "get_location", "input": {}},
                    {"type": "tool_use", "name": "get_time", "input": {"tz": "local"}}]},
        {"blocks": [{"type": "text", "text": "{{results[0]}} at {{results[1]}}"}]}]},
    "approval": {"name": "approval", "fragment_size": 8, "steps": [
        {"blocks": [{"type": "text", "text": "I will delete that cell."},
                    {"type": "tool_use", "name": "delete_cell", "input": {"cell_id": "cell_missing"}}]},
        {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}]},
    "notebook": {"name": "notebook", "fragment_size": 8, "steps": [
        {"blocks": [{"type": "tool_use", "name": "create_cell", "input": {"code": "x = 1 + 1"}}]},
        {"blocks": [{"type": "text", "text": "Created: {{last}}"}]}]},
    "slow": {"name": "slow", "fragment_size": 12, "delay_ms": 8, "steps": [
        {"blocks": [{"type": "thinking", "thinking": "Thinking it over.", "signature": "sig"},
                    {"type": "text", "text": LONG_TEXT}]}]},
    "echo": {"name": "echo", "fragment_size": 6,
             "steps": [{"blocks": [{"type": "text", "text": "You said: {{input}}"}]}]},
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Scenario name -> the ``scripted:`` model string that plays it."""
    d = tmp_path_factory.mktemp("scenarios")
    return {name: scenario(d / f"{name}.json", doc) for name, doc in SCENARIOS.items()}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server")


@pytest.fixture(scope="module")
def server(workdir: Path, models: dict[str, str]) -> Iterator[Server]:
    srv = start_server(workdir, model=models["echo"], env={"TURNSTREAM_PING_INTERVAL": "0.3",
                                                           "TURNSTREAM_ALLOWED_ORIGINS": "http://allowed.example"})
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


def server_errors(srv: Server) -> list[str]:
    """Error lines of the server's log, except a tool's own failure (a result for the model)."""
    out = []
    for line in srv.log_text().split("\n"):
        if not line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if doc.get("level") in ("error", "critical") and doc.get("logger") != "turnstream.tools":
            out.append(line)
    return out


@pytest.fixture(scope="module")
def other_key(server: Server, workdir: Path) -> str:
    """The API key of a second user of the same server."""
    return add_user(server.db, "bob", workdir)


@pytest.fixture
def fresh_pg() -> Iterator[str]:
    """A new PostgreSQL database for one test, dropped after it."""
    from tests.support.pg import scratch_database

    with scratch_database("turnstream_srv", hint="make postgres") as url:
        yield url
