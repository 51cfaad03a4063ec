"""PostgreSQL plumbing shared by the store and the bus: connections (with a bounded connect
time) and the store's small connection pool.

Connections: a small pool of our own (``pool_size``, default 4) rather than one
connection behind a lock. One connection would queue every turn of the process behind the
slowest statement of any of them, and a transaction waiting on a row lock (another process
holding the same turn) would stall the whole process. A few connections let concurrent
turns write side by side while keeping the server's connection count bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from ..errors import StoreError

if TYPE_CHECKING:
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record]

CONNECT_TIMEOUT = 10.0


def _dsn(url: str) -> tuple[str, float]:
    """The URL for asyncpg and the connect timeout. asyncpg takes the timeout as an argument
    and would pass libpq's ``connect_timeout`` query parameter on to the server as a setting
    (which the server refuses), so it is taken out of the URL here. A missing, zero or
    negative value (libpq's "wait forever") means ``CONNECT_TIMEOUT``: connecting never hangs."""
    parts = urlsplit(url)
    if "connect_timeout" not in parts.query:
        return url, CONNECT_TIMEOUT
    timeout, kept = CONNECT_TIMEOUT, []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "connect_timeout":
            timeout = float(value) if value and float(value) > 0 else CONNECT_TIMEOUT
        else:
            kept.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), timeout


async def connect(url: str) -> Conn:
    """One connection to the database at ``url`` (a ``postgresql://`` URL), failing at once
    when refused and after the connect timeout when the server does not answer."""
    dsn, timeout = _dsn(url)
    return await asyncpg.connect(dsn, timeout=timeout)


async def close(conn: Conn) -> None:
    """Close a connection: politely (bounded) when it is idle, else (lost, left in a
    transaction, or the polite close failed) by dropping the socket."""
    try:
        if not conn.is_closed() and not conn.is_in_transaction():
            with contextlib.suppress(Exception):
                await conn.close(timeout=CONNECT_TIMEOUT)
    finally:
        if not conn.is_closed():
            conn.terminate()


class _Pool:
    """At most ``size`` connections, each lent to one task at a time.

    After the server restarts, every idle connection is dead: each is found so before it is
    lent and replaced by a new one, so the first operation after a restart works instead of
    failing on a stale socket. No round trip is needed for that: asyncpg reads its socket
    from the event loop at all times (notifications arrive unasked), so the server's FATAL
    message and EOF are handled as soon as the loop has run once after they arrived, and
    ``is_closed()`` says so. A restart takes far longer than that; only a connection the
    server drops while this thread blocks the loop, and that is lent before the loop runs
    again, is lent dead (its operation then fails at once, and the next one gets a new
    connection). Closing that window too would take a ``poll()`` of the socket, which
    asyncpg only exposes through its private transport. An operation that fails (the
    server went away mid-statement or mid-transaction) raises asyncpg's error at once and
    its connection is not reused. While the server is down, connecting fails at once
    (refused) or after the connect timeout (default 10 s), never hangs."""

    def __init__(self, url: str, size: int) -> None:
        self._url = url
        self._idle: list[Conn] = []
        self._slots = asyncio.Semaphore(size)
        self._closed = False

    async def _take(self) -> Conn:
        while self._idle:
            conn = self._idle.pop()
            if not conn.is_closed():
                return conn
            conn.terminate()
        return await connect(self._url)

    async def acquire(self) -> Conn:
        if self._closed:
            raise StoreError("the store is closed")
        await self._slots.acquire()
        try:
            return await self._take()
        except BaseException:
            self._slots.release()
            raise

    async def release(self, conn: Conn, clean: bool) -> None:
        """Give a connection back; ``clean`` is False when its task left it by cancellation
        (a statement may still be running on it), and such a connection is not reused."""
        try:
            if clean and not self._closed and not conn.is_closed() and not conn.is_in_transaction():
                self._idle.append(conn)
            elif clean:
                await close(conn)
            else:
                conn.terminate()
        finally:
            self._slots.release()

    def connection(self) -> _Lease:
        """Borrow a connection: ``async with pool.connection() as conn``."""
        return _Lease(self)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await close(conn)


class _Lease:
    """``async with`` for one borrowed connection (a class rather than a generator-based
    context manager: it is entered on every store call)."""

    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: _Pool) -> None:
        self._pool = pool

    async def __aenter__(self) -> Conn:
        self._conn = await self._pool.acquire()
        return self._conn

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        # An exception (a database error, a conflict we raise) leaves the connection idle;
        # a cancellation (or KeyboardInterrupt…) may leave a statement running on it.
        await self._pool.release(self._conn, exc is None or isinstance(exc, Exception))
