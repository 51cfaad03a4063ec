"""Durable storage of users, sessions, turns, blocks and replayable events."""

from __future__ import annotations

from ..bus import Bus
from ..errors import MissingExtraError, SeqConflictError, TurnConflictError
from ..settings import DEFAULT_DB, DatabaseURL, Settings
from .memory import MemoryStore
from .protocol import Store, StoredEvent, User


def open_store(url: str | DatabaseURL | None = None) -> Store:
    """The store a database URL names (``--db`` / ``TURNSTREAM_DB``, parsed by
    ``settings.DatabaseURL``); not opened yet, so ``await store.open()`` (which migrates the
    schema) before use. ``None`` takes the database of ``Settings.from_env()``."""
    if url is None:
        db = Settings.from_env().db
    elif isinstance(url, DatabaseURL):
        db = url
    else:
        db = DatabaseURL.parse(url)
    if db.kind == "memory":
        return MemoryStore()
    if db.kind == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(db.target)
    try:
        from .postgres import PostgresStore
    except ImportError as exc:
        raise MissingExtraError("postgres", "asyncpg") from exc
    return PostgresStore(db.target)


def open_bus(db: DatabaseURL) -> Bus:
    """The bus that goes with the store of ``db``: shared over PostgreSQL ``LISTEN/NOTIFY``
    when the database is, else in-process."""
    if not db.shared:
        return Bus()
    from .postgres_bus import PostgresBus

    return PostgresBus(db.target)


__all__ = [
    "DEFAULT_DB",
    "MemoryStore",
    "SeqConflictError",
    "Store",
    "StoredEvent",
    "TurnConflictError",
    "User",
    "open_bus",
    "open_store",
]
