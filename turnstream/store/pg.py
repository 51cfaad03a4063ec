"""PostgreSQL plumbing shared by the store and the bus: connections (with a bounded connect
time), the store's small connection pool, the lock that tells other processes this one is
alive (``LivenessLock``), and what the store runs its operations on (``PostgresConnection``:
the pool and the lock, the schema's migrations, the primitives of ``sqlbase.SQLStore``).

Connections: a small pool of our own (``pool_size``, default 4) rather than one
connection behind a lock. One connection would queue every turn of the process behind the
slowest statement of any of them, and a transaction waiting on a row lock (another process
holding the same turn) would stall the whole process. A few connections let concurrent
turns write side by side while keeping the server's connection count bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
from asyncpg.exceptions import UniqueViolationError

from ..errors import StoreError
from ..settings import DatabaseURL
from .rows import Row, new_id
from .schema import SCHEMA_MIGRATIONS, pending
from .statements import POSTGRES as Q

if TYPE_CHECKING:
    Conn: TypeAlias = asyncpg.Connection[asyncpg.Record]

CONNECT_TIMEOUT = 10.0
_MIGRATION_LOCK = 0x7475726E73747265  # pg_advisory_xact_lock key: b"turnstre"

log = logging.getLogger("turnstream.store")


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


_UNAVAILABLE = (OSError, asyncpg.InterfaceError, asyncpg.exceptions.PostgresConnectionError,
                asyncpg.exceptions.InsufficientResourcesError, asyncpg.exceptions.OperatorInterventionError)
"""Driver errors that say the database cannot serve now (connection lost, disk full, shut
down), as opposed to a statement's own error (a conflict the store handles)."""


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
        if isinstance(exc, _UNAVAILABLE):  # the database is gone or full: one error for callers
            raise StoreError(f"the PostgreSQL database failed: {type(exc).__name__}: {exc}") from exc


class LivenessLock:
    """This process's liveness on PostgreSQL: a session advisory lock, held on a connection of
    its own for as long as the store is open (key: ``key``, written to the runner's row).
    PostgreSQL releases it the moment that connection ends, which a dead process's does, so
    another process sees in ``pg_locks`` that this runner is gone. If the connection is lost
    while the process lives (a database restart), it is opened again and the lock retaken;
    in between, another process may take this runner's turns over, and the write guard of
    the store (runner ownership) stops this process from writing them."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.key = secrets.randbelow(2**62 - 1) + 1
        self._conn: Conn | None = None
        self._task: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()

    async def hold(self) -> None:
        """Take the lock (at the store's open) and keep it until ``release``."""
        await self._take()
        self._task = asyncio.create_task(self._keep(), name="turnstream-liveness")

    async def _take(self) -> None:
        conn = await connect(self.url)
        try:
            await conn.execute("SELECT pg_advisory_lock($1)", self.key)
        except BaseException:
            await close(conn)
            raise
        self._lost.clear()
        conn.add_termination_listener(lambda _conn: self._lost.set())
        self._conn = conn

    async def _keep(self) -> None:
        while True:
            await self._lost.wait()
            log.warning("the liveness lock's connection was lost; taking the lock again")
            delay = 0.1
            while True:
                try:
                    await self._take()
                    break
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.info("liveness lock: %s; retrying", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)

    async def release(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        conn, self._conn = self._conn, None
        if conn is not None:
            await close(conn)  # ending the session releases the lock


def rowcount(status: str) -> int:
    """The row count of a command tag (``UPDATE 1``, ``DELETE 0``, ``INSERT 0 1``)."""
    return int(status.rpartition(" ")[2])


class PostgresConnection:
    """A store's connections to PostgreSQL: its pool, its liveness lock, its runner's row."""

    def __init__(self, url: str, *, pool_size: int = 4, runner_id: str | None = None) -> None:
        self.url = url
        self.runner_id = runner_id or new_id("run")
        self._pool_size = pool_size
        self._pool: _Pool | None = None
        self._liveness = LivenessLock(url)

    async def open(self) -> None:
        if self._pool is not None:
            return
        pool = _Pool(self.url, self._pool_size)
        try:
            async with pool.connection() as conn:
                await self._migrate(conn)
                await self._liveness.hold()
                await self._beat(conn)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            await self._liveness.release()
            await pool.aclose()
            raise StoreError(f"cannot open the PostgreSQL database {DatabaseURL.parse(self.url)}: "
                             f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            await self._liveness.release()
            await pool.aclose()
            raise
        self._pool = pool

    @staticmethod
    async def _migrate(conn: Conn) -> None:
        async with conn.transaction():
            # Two processes opening a fresh database at once: the second waits here, then
            # finds the migrations recorded.
            await conn.execute(Q.migration_lock, _MIGRATION_LOCK)
            await conn.execute(SCHEMA_MIGRATIONS)
            for mig in pending({row[0] for row in await conn.fetch(Q.migrations_done)}, "postgres"):
                # No arguments: the simple query protocol, which runs a script of several statements.
                await conn.execute(mig.sql)
                await conn.execute(Q.record_migration, mig.version, mig.name, time.time())

    async def aclose(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        try:
            async with pool.connection() as conn:
                await conn.execute(Q.delete_runner, self.runner_id)
        finally:
            await self._liveness.release()
            await pool.aclose()

    def _conn(self) -> _Lease:
        """Borrow a connection: ``async with self._conn() as conn``."""
        if self._pool is None:
            raise StoreError("the store is not open: await store.open() first")
        return self._pool.connection()

    async def _row(self, sql: str, *args: Any) -> Row | None:
        async with self._conn() as conn:
            return cast("Row | None", await conn.fetchrow(sql, *args))

    async def _rows(self, sql: str, *args: Any) -> list[Row]:
        async with self._conn() as conn:
            return cast("list[Row]", await conn.fetch(sql, *args))

    async def _change(self, sql: str, *args: Any) -> int:
        async with self._conn() as conn:
            return rowcount(await conn.execute(sql, *args))

    async def _insert(self, sql: str, *args: Any) -> bool:
        async with self._conn() as conn:
            try:
                await conn.execute(sql, *args)
            except UniqueViolationError:
                return False
        return True

    async def _beat(self, conn: Conn) -> None:
        await conn.execute(Q.beat, self.runner_id, self._liveness.key)
