"""A real ``turnstream serve`` per test module (SQLite in a temporary directory), and the
scenarios its sessions play (each session picks one as its ``model``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import SCENARIOS, Server, scenario, server_errors, start_server


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


@pytest.fixture(scope="module")
def other_key(server: Server, workdir: Path) -> str:
    """The API key of a second user of the same server."""
    return server.add_user("bob", workdir)


@pytest.fixture
def fresh_pg() -> Iterator[str]:
    """A new PostgreSQL database for one test, dropped after it."""
    from tests.support.pg import scratch_database

    with scratch_database("turnstream_srv", hint="make postgres") as url:
        yield url
