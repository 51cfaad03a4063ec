"""The backends the store contract suite runs against (``tests/support/store_backends.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.store_backends import Backend, memory_backend, postgres_backend, sqlite_backend
from turnstream.store import Store


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    """The session's PostgreSQL database, seen through a fresh schema of this test's own
    (``search_path``), so that every test starts from an empty, unmigrated database."""
    from tests.support.pg import scratch_schema_sync

    with scratch_schema_sync(pg_url, "t") as url:
        yield url


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every contract test runs on every backend; tests marked ``durable`` (a second process
    on the same database, or SQL tables to look at) only on the SQL ones."""
    if "backend" in metafunc.fixturenames:
        names = ["sqlite", "postgres"]
        if metafunc.definition.get_closest_marker("durable") is None:
            names.insert(0, "memory")
        metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "memory":
        return memory_backend()
    if request.param == "sqlite":
        return sqlite_backend(tmp_path / "turnstream.db")
    return postgres_backend(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    async with backend.opened() as s:
        yield s
