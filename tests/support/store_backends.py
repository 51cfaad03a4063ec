"""The store backends the contract suite runs against (memory, SQLite, PostgreSQL), and how to
look inside each behind the store's back."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def memory_backend() -> Backend:
    stores: list[MemoryStore] = []

    def make(**kw: Any) -> MemoryStore:
        stores.append(MemoryStore(**kw))
        return stores[-1]

    async def raw() -> str:
        return " ".join(repr(vars(s)) for s in stores)

    return Backend("memory", make, shared=False, raw=raw)


def sqlite_backend(path: Path) -> Backend:
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


def postgres_backend(url: str) -> Backend:
    from tests.support.pg import fetch
    from turnstream.store.postgres import PostgresStore

    async def sql(query: str) -> list[tuple[Any, ...]]:
        return await fetch(url, query)

    async def raw() -> str:
        rows = await sql("SELECT string_agg(u::text, ' ') FROM users u")
        return str(rows[0][0])

    return Backend("postgres", lambda **kw: PostgresStore(url, **kw), shared=True, sql=sql, raw=raw)
