"""The backends the store contract suite runs against, and how to look inside each."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from turnstream.store import MemoryStore, Store
from turnstream.store.sqlite import SQLiteStore


@dataclass
class Backend:
    name: str
    make: Callable[..., Store]
    """A new, unopened store on the same database (``runner_id=`` may be given)."""
    shared: bool
    """Whether two stores from ``make`` see the same data, as two processes would."""
    sql: Callable[[str], Awaitable[list[tuple[Any, ...]]]] | None = None
    """Run a query on the database behind the store's back (SQL backends only)."""
    raw: Callable[[], Awaitable[str]] | None = None
    """Everything the database holds, as text (for "this secret is not stored")."""

    @asynccontextmanager
    async def opened(self, **kw: Any) -> AsyncIterator[Store]:
        store = self.make(**kw)
        await store.open()
        try:
            yield store
        finally:
            await store.aclose()


def _memory() -> Backend:
    stores: list[MemoryStore] = []

    def make(**kw: Any) -> MemoryStore:
        stores.append(MemoryStore(**kw))
        return stores[-1]

    async def raw() -> str:
        return " ".join(repr(vars(s)) for s in stores)

    return Backend("memory", make, shared=False, raw=raw)


def _sqlite(path: Path) -> Backend:
    async def sql(query: str) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(path)
        try:
            return conn.execute(query).fetchall()
        finally:
            conn.close()

    async def raw() -> str:
        files = [p for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
        return " ".join(p.read_bytes().decode("latin-1") for p in files)

    return Backend("sqlite", lambda **kw: SQLiteStore(path, **kw), shared=True, sql=sql, raw=raw)


def _postgres(url: str) -> Backend:
    from tests.support.pg import fetch
    from turnstream.store.postgres import PostgresStore

    async def sql(query: str) -> list[tuple[Any, ...]]:
        return await fetch(url, query)

    async def raw() -> str:
        rows = await sql("SELECT string_agg(u::text, ' ') FROM users u")
        return str(rows[0][0])

    return Backend("postgres", lambda **kw: PostgresStore(url, **kw), shared=True, sql=sql, raw=raw)


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
        return _memory()
    if request.param == "sqlite":
        return _sqlite(tmp_path / "turnstream.db")
    return _postgres(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    async with backend.opened() as s:
        yield s
