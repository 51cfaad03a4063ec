"""Durable storage of users, sessions, turns, blocks and replayable events."""

from __future__ import annotations

import os

from ..errors import MissingExtraError, SeqConflictError, TurnConflictError, UsageError
from .memory import MemoryStore
from .protocol import Store, StoredEvent, User

DEFAULT_DB = "sqlite:///./turnstream.db"

_FORMS = "sqlite:///path/to.db, sqlite:///:memory:, postgresql://user@host/dbname or memory://"


def open_store(url: str | None = None) -> Store:
    """The store a database URL names (``--db`` / ``TURNSTREAM_DB``); not opened yet, so
    ``await store.open()`` (which migrates the schema) before use.

    ``None`` reads ``TURNSTREAM_DB``, else ``sqlite:///./turnstream.db``. Forms:
    ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:`` (a private
    database), ``postgresql://…`` or ``postgres://…`` (a libpq-style URL), ``memory://``.
    """
    if url is None:
        url = os.environ.get("TURNSTREAM_DB") or DEFAULT_DB
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise UsageError(f"the database must be given as a URL ({_FORMS}), not {url!r}")
    if scheme == "memory":
        return MemoryStore()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise UsageError(f"a SQLite URL needs three slashes and a path: {_FORMS}")
        from .sqlite import SQLiteStore

        return SQLiteStore(rest[1:])
    # postgresql+psycopg:// (SQLAlchemy's spelling, from when the store ran on psycopg) is
    # still accepted: it names the same database.
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        try:
            from .postgres import PostgresStore
        except ImportError as exc:
            raise MissingExtraError("postgres", "asyncpg") from exc
        return PostgresStore("postgresql://" + rest)
    # Only the scheme is echoed: the rest of the URL may hold a password.
    raise UsageError(f"unknown database URL scheme {scheme + '://'!r} (--db / TURNSTREAM_DB); use {_FORMS}")


__all__ = [
    "DEFAULT_DB",
    "MemoryStore",
    "SeqConflictError",
    "Store",
    "StoredEvent",
    "TurnConflictError",
    "User",
    "open_store",
]
