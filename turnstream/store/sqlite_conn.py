"""The SQLite store's one connection, and how each call gets to run on it.

One connection serves the whole store, and every call runs a small synchronous function on
it. The fast path runs that function right on the event loop with ``busy_timeout = 0``: in
WAL mode with ``synchronous = NORMAL`` a commit does not wait for the disk, so a call costs
tens of microseconds, far less than a hop to a worker thread (measured: a 3-step turn's
persistence fell from about 3 ms to under 1 ms of CPU). When the database is locked by
another process, or a call is already waiting in the worker thread, the call goes to the
thread instead (one worker thread, one call at a time) with ``busy_timeout`` of 5 s, so
the event loop never waits on another process's lock and the connection is never used by
two threads at once. A call is never abandoned half-way: cancelling the awaiting task
waits for the thread, so a transaction always commits or rolls back as a whole.

Writes run in ``BEGIN IMMEDIATE`` transactions (``write``), which take SQLite's write lock
up front; with ``busy_timeout`` that serialises writers across processes sharing the file
as well.

The store's operations are in ``sqlite.py``; this is what they run on: the connection's
opening (migrations included) and closing, ``_run`` for a call, ``_run_grouped`` for a
turn's writes, and ``_row``, ``_rows``, ``_change``, ``_insert`` for ``sqlbase.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..aio import shielded
from ..errors import StoreError
from .liveness import FileLocks
from .rows import Row, new_id
from .schema import SCHEMA_MIGRATIONS, pending
from .statements import SQLITE as Q

T = TypeVar("T")


_BARE: set[sqlite3.Connection] = set()
"""Connections running a group's writes without savepoints (``SQLiteConnection._commit_group``)."""


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction holding SQLite's write lock from its first statement; inside a
    group's transaction (``SQLiteConnection._commit_group``), a savepoint of its own, so that a
    write that fails undoes only itself, or nothing at all on the group's first try."""
    if conn.in_transaction:
        if conn in _BARE:
            yield
            return
        conn.execute("SAVEPOINT w")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO w")
            conn.execute("RELEASE w")
            raise
        conn.execute("RELEASE w")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def read(conn: sqlite3.Connection) -> Iterator[None]:
    """A read transaction: its statements see one snapshot (WAL)."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements with SQLite's own tokenizer (semicolons in comments
    and strings are safe). ``executescript`` is not used because it commits first."""
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            yield buf
            buf = ""



def _patiently(fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection) -> T:
    """``fn(conn)`` with a busy timeout: in the worker thread, waiting for a lock is fine."""
    conn.execute("PRAGMA busy_timeout = 5000")
    try:
        return fn(conn)
    finally:
        conn.execute("PRAGMA busy_timeout = 0")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _owner_only(paths: Sequence[str]) -> None:
    """Take the group's and others' permissions off those of ``paths`` that exist."""
    for path in paths:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            continue
        if mode & 0o077:
            os.chmod(path, mode & 0o700)


class SQLiteConnection:
    """The connection of a store on one SQLite file (``:memory:`` gives a private database)."""

    def __init__(self, path: str | os.PathLike[str] = "./turnstream.db", *,
                 runner_id: str | None = None) -> None:
        self.path = os.fspath(path)
        self.runner_id = runner_id or new_id("run")
        self._conn: sqlite3.Connection | None = None
        self._lock = FileLocks(None if self.path == ":memory:" else Path(self.path + ".runners"), self.runner_id)
        """This runner's liveness lock, and the check of other runners' (liveness.py)."""
        self._thread: ThreadPoolExecutor | None = None
        """The one worker thread for calls that cannot run inline (see the module doc)."""
        self._queued = 0
        """Calls waiting for or running in the worker thread; the fast path waits its turn."""
        self._group: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        """Turn writes asked for in this pass of the event loop (``_run_grouped``)."""

    # plumbing --------------------------------------------------------------
    async def open(self) -> None:
        if self._conn is not None:
            return
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="turnstream-sqlite")
        try:
            self._conn = await self._in_thread(self._connect)
            self._lock.hold()
        except (OSError, sqlite3.Error) as exc:
            self._thread.shutdown(wait=False)
            self._thread = None
            raise StoreError(f"cannot open the SQLite database {self.path}: {exc}") from exc

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the worker thread. A call once sent is awaited to its end even
        if the caller is cancelled meanwhile (the cancellation follows): a write the caller
        gave up on must not run behind the next one's back."""
        assert self._thread is not None
        return await shielded(asyncio.get_running_loop().run_in_executor(self._thread, fn, *args))

    def _connect(self) -> sqlite3.Connection:
        files = [] if self.path == ":memory:" else [self.path, f"{self.path}-wal", f"{self.path}-shm"]
        if files:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # A new database is readable by its owner only (it holds every user's
            # conversations and key hashes); SQLite gives its -wal and -shm files the
            # database's mode. One made earlier with a wider mode is tightened.
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            _owner_only(files)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
            with write(conn):
                self._beat(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # the fast path must never wait (see the module doc)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        with write(conn):
            conn.execute(SCHEMA_MIGRATIONS)
            for mig in pending({row[0] for row in conn.execute(Q.migrations_done)}, "sqlite"):
                for stmt in _statements(mig.sql):
                    conn.execute(stmt)
                conn.execute(Q.record_migration, (mig.version, mig.name, time.time()))

    def _beat(self, c: sqlite3.Connection) -> None:
        c.execute(Q.beat, (self.runner_id, time.time()))

    async def aclose(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None

        def close() -> None:
            try:
                conn.execute("PRAGMA busy_timeout = 5000")
                with write(conn):
                    conn.execute(Q.delete_runner, (self.runner_id,))
            finally:
                conn.close()

        try:
            await self._in_thread(close)
        finally:
            self._lock.release()
            if self._thread is not None:
                self._thread.shutdown(wait=False)
                self._thread = None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)``, inline or in the worker thread (see the module doc). SQLite's own
        failures (disk full, I/O error, a lock held past the busy timeout) become
        ``StoreError``; the store's refusals (``NotFound``, conflicts) pass as they are."""
        conn = self._conn
        if conn is None:
            raise StoreError("the store is not open: await store.open() first")
        try:
            if not self._queued:
                try:
                    return fn(conn)
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
            self._queued += 1
            try:
                return await self._in_thread(_patiently, fn, conn)
            finally:
                self._queued -= 1
        except sqlite3.Error as exc:
            raise StoreError(f"the SQLite database failed: {exc}") from exc

    async def _run_grouped(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``_run`` for a turn's writes, committed together with the others asked for in the
        same pass of the event loop: one transaction (``BEGIN IMMEDIATE`` … ``COMMIT``) for
        all, each write in a savepoint of its own. At a thousand concurrent turns many writes
        are asked for in each pass, and a commit, with the pages it writes to the WAL, costs
        more than the statements of one write. Nothing waits for company: the group is
        committed on the next pass, so a write is no later than it was alone."""
        if self._conn is None:
            raise StoreError("the store is not open: await store.open() first")
        if self._queued:  # writes wait in the worker thread: keep their order
            return await self._run(fn)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._group.append((fn, fut))
        if len(self._group) == 1:
            loop.call_soon(self._commit_group)
        return await shielded(fut)  # a write once asked for is committed or refused as a whole

    def _commit_group(self) -> None:
        group, self._group = self._group, []
        conn = self._conn
        if conn is None or self._queued:
            for fn, fut in group:  # the fast path is closed: each as ``_run`` does it
                self._settle(fut, asyncio.ensure_future(self._run(fn)))
            return
        if len(group) == 1:  # alone: its own transaction, without a savepoint
            self._commit_one(conn, *group[0])
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # another process holds the write lock: the slow path
            for fn, fut in group:
                self._settle(fut, asyncio.ensure_future(self._run(fn)))
            return
        # First try: every write bare, in the one transaction (a savepoint and its release cost
        # more than most writes' own statements). A write that refuses (a conflict, a turn taken
        # over) or fails undoes the whole try, and the group runs again with a savepoint each,
        # so that only that write fails.
        _BARE.add(conn)
        try:
            values = [fn(conn) for fn, _ in group]
        except Exception:
            values = None
        finally:
            _BARE.discard(conn)
        if values is not None:
            self._commit(conn, [(fut, value, None) for (_, fut), value in zip(group, values, strict=True)])
            return
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # taken by another process meanwhile: the slow path
            for fn, fut in group:
                self._settle(fut, asyncio.ensure_future(self._run(fn)))
            return
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        for fn, fut in group:
            try:
                outcomes.append((fut, fn(conn), None))
            except sqlite3.Error as exc:
                outcomes.append((fut, None, StoreError(f"the SQLite database failed: {exc}")))
            except Exception as exc:  # the store's refusals (NotFound, conflicts, TurnTakenOver)
                outcomes.append((fut, None, exc))
        self._commit(conn, outcomes)

    @staticmethod
    def _commit(conn: sqlite3.Connection,
                outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
        """Commit a group's transaction and settle each write's future with its outcome."""
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:  # disk full, I/O error: nothing of the group is stored
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreError(f"the SQLite database failed: {exc}")
            outcomes = [(fut, None, err if err is not None else error) for fut, _, err in outcomes]
        for fut, value, err in outcomes:
            if not fut.done():
                if err is None:
                    fut.set_result(value)
                else:
                    fut.set_exception(err)

    def _commit_one(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any],
                    fut: asyncio.Future[Any]) -> None:
        """One write of a group of one, inline as ``_run``'s fast path runs it."""
        try:
            value = fn(conn)
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):  # taken by another process meanwhile: the slow path
                self._settle(fut, asyncio.ensure_future(self._run(fn)))
            elif not fut.done():
                fut.set_exception(StoreError(f"the SQLite database failed: {exc}"))
            return
        except sqlite3.Error as exc:
            if not fut.done():
                fut.set_exception(StoreError(f"the SQLite database failed: {exc}"))
            return
        except Exception as exc:  # the store's refusals
            if not fut.done():
                fut.set_exception(exc)
            return
        if not fut.done():
            fut.set_result(value)

    @staticmethod
    def _settle(fut: asyncio.Future[Any], task: asyncio.Future[Any]) -> None:
        def done(t: asyncio.Future[Any]) -> None:
            if fut.done():
                return
            if t.cancelled():
                fut.cancel()
            elif (exc := t.exception()) is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(t.result())

        task.add_done_callback(done)

    # the primitives of sqlbase.SQLStore ----------------------------------------
    async def _row(self, sql: str, *args: Any) -> Row | None:
        return await self._run(lambda c: c.execute(sql, args).fetchone())

    async def _rows(self, sql: str, *args: Any) -> list[Row]:
        return await self._run(lambda c: c.execute(sql, args).fetchall())

    async def _change(self, sql: str, *args: Any) -> int:
        return await self._run(lambda c: _changed(c, sql, args))

    async def _insert(self, sql: str, *args: Any) -> bool:
        return await self._run(lambda c: _inserted(c, sql, args))


def _changed(c: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> int:
    with write(c):
        return c.execute(sql, args).rowcount


def _inserted(c: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> bool:
    try:
        with write(c):
            c.execute(sql, args)
    except sqlite3.IntegrityError:
        return False
    return True
