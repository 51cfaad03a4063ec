"""SQLite store: one file, WAL, stdlib ``sqlite3``.

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

Writes run in ``BEGIN IMMEDIATE`` transactions, which take SQLite's write lock up front;
with ``busy_timeout`` that serialises writers across processes sharing the file as well.

Why one module of this size: every statement of the store protocol for SQLite, with the
one connection they share, in one place; the statements common to both SQL stores are in
``_sql.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import orjson

from ..aio import shielded
from ..blocks import Attachment, Block, Session, ToolResultBlock, Turn, TurnStatus, TurnStopReason, Usage
from ..errors import (
    AlreadyExists,
    NotFound,
    SeqConflictError,
    StaleNotebook,
    StoreError,
    TurnConflictError,
    TurnTakenOver,
    UserExists,
)
from ._sql import (
    SCHEMA_MIGRATIONS,
    SESSION_COLS,
    TURN_COLS,
    agents_json,
    block_row,
    dumps,
    event_from_row,
    migrations,
    parse_block,
    session_from_row,
    turn_from_row,
    usage_to_json,
)
from .keys import hash_key, new_key
from .liveness import FileLocks
from .protocol import (
    NotebookFile,
    QueuedMessage,
    Spend,
    StoredEvent,
    ToolCallRecord,
    ToolCallStart,
    ToolDecision,
    ToolGrant,
    User,
    check_files_total,
    check_pending,
    first_event_of,
)

T = TypeVar("T")


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction holding SQLite's write lock from its first statement; inside a
    group's transaction (``SQLiteStore._commit_group``), a savepoint of its own, so that a
    write that fails undoes only itself."""
    if conn.in_transaction:
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
def _read(conn: sqlite3.Connection) -> Iterator[None]:
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


def _open_conflict(conn: sqlite3.Connection, exc: sqlite3.IntegrityError, session_id: str) -> NoReturn:
    """Turn a violation of the one-open-turn index into TurnConflictError; re-raise others."""
    if "turns.session_id" not in str(exc):
        raise exc
    row = conn.execute("SELECT id FROM turns WHERE session_id = ?"
                       " AND status IN ('running', 'awaiting_client')", (session_id,)).fetchone()
    raise TurnConflictError(row[0] if row else "?") from None


def _refused(conn: sqlite3.Connection, turn_id: str, seq: int | None, n: int | None, runner: str) -> None:
    """Explain why a guarded write to a turn touched no row."""
    row = conn.execute("SELECT next_seq, last_n, status, runner_id FROM turns WHERE id = ?", (turn_id,)).fetchone()
    if row is None:
        raise NotFound("turn", f"turn {turn_id} not found")
    if row[2] == "running" and row[3] != runner:
        raise TurnTakenOver(turn_id)
    if seq is not None and seq != row[0]:
        raise SeqConflictError(f"block seq {seq} is not the next seq {row[0]} of {turn_id}")
    raise SeqConflictError(f"event {n} is not above the last event {row[1]} of {turn_id}")


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


class SQLiteStore:
    """The Store protocol on one SQLite file (``:memory:`` gives a private database)."""

    def __init__(self, path: str | os.PathLike[str] = "./turnstream.db", *,
                 runner_id: str | None = None) -> None:
        self.path = os.fspath(path)
        self.runner_id = runner_id or _new_id("run")
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
            with _write(conn):
                self._beat(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # the fast path must never wait (see the module doc)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        with _write(conn):
            conn.execute(SCHEMA_MIGRATIONS)
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            known = migrations("sqlite")
            if done - {m.version for m in known}:
                raise StoreError(f"the database has migrations {sorted(done)} unknown to this turnstream;"
                                   " a newer version wrote it")
            for mig in known:
                if mig.version in done:
                    continue
                for stmt in _statements(mig.sql):
                    conn.execute(stmt)
                conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                             (mig.version, mig.name, time.time()))

    async def aclose(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None

        def close() -> None:
            try:
                conn.execute("PRAGMA busy_timeout = 5000")
                with _write(conn):
                    conn.execute("DELETE FROM runners WHERE id = ?", (self.runner_id,))
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
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        for fn, fut in group:
            try:
                outcomes.append((fut, fn(conn), None))
            except sqlite3.Error as exc:
                outcomes.append((fut, None, StoreError(f"the SQLite database failed: {exc}")))
            except Exception as exc:  # the store's refusals (NotFound, conflicts, TurnTakenOver)
                outcomes.append((fut, None, exc))
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

    # users -----------------------------------------------------------------
    async def create_user(self, name: str) -> tuple[User, str]:
        user, key = User(id=_new_id("usr"), name=name), new_key()

        def op(c: sqlite3.Connection) -> None:
            with _write(c):  # the write lock is held from here: no other writer between check and insert
                if c.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone() is not None:
                    raise UserExists(name)
                c.execute("INSERT INTO users (id, name, key_hash, created_at) VALUES (?, ?, ?, ?)",
                          (user.id, name, hash_key(key), time.time()))

        await self._run(op)
        return user, key

    async def user_by_key(self, api_key: str) -> User | None:
        digest = hash_key(api_key)
        row = await self._run(lambda c: c.execute("SELECT id, name FROM users WHERE key_hash = ?",
                                                  (digest,)).fetchone())
        return User(id=row[0], name=row[1]) if row else None

    # sessions --------------------------------------------------------------
    async def create_session(
        self, user_id: str, *, title: str = "", model: str = "", toolset: str | None = None,
        session_id: str | None = None, agents: list[dict[str, Any]] | None = None,
        current_agent: str | None = None,
    ) -> Session:
        s = Session(id=session_id or _new_id("ses"), user_id=user_id, title=title, model=model,
                    toolset=toolset, created_at=time.time(), agents=agents, current_agent=current_agent)

        def op(c: sqlite3.Connection) -> None:
            try:
                with _write(c):
                    c.execute(f"INSERT INTO sessions ({SESSION_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                              (s.id, s.user_id, s.title, s.model, s.toolset, s.created_at, agents_json(agents),
                               current_agent))
            except sqlite3.IntegrityError:
                raise AlreadyExists(f"session {s.id} already exists") from None

        await self._run(op)
        return s

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None:
        def op(c: sqlite3.Connection) -> Session | None:
            with _read(c):
                row = c.execute(f"SELECT {SESSION_COLS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
                if row is None:
                    return None
                s = session_from_row(row)
                if with_turns:
                    s.turns = self._turns(c, session_id)
                return s

        return await self._run(op)

    async def list_sessions(self, user_id: str) -> list[Session]:
        rows = await self._run(lambda c: c.execute(
            f"SELECT {SESSION_COLS} FROM sessions WHERE user_id = ? ORDER BY rowid", (user_id,)).fetchall())
        return [session_from_row(r) for r in rows]

    async def set_current_agent(self, session_id: str, name: str) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            with _write(c):
                return c.execute("UPDATE sessions SET current_agent = ? WHERE id = ?",
                                 (name, session_id)).rowcount == 1

        return await self._run(op)

    async def rename_session(self, session_id: str, title: str) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            with _write(c):
                return c.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id)).rowcount == 1

        return await self._run(op)

    async def delete_session(self, session_id: str) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            with _write(c):
                return c.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount == 1

        return await self._run(op)

    # turns -----------------------------------------------------------------
    async def create_turn(
        self, session_id: str, input: str, *, model: str, client_tools: list[dict[str, Any]] | None = None,
        first_event: Callable[[str], StoredEvent] | None = None,
    ) -> Turn:
        t = Turn(id=_new_id("turn"), session_id=session_id, input=input, model=model, created_at=time.time())
        tools = dumps(client_tools or [])
        first = first_event_of(t.id, first_event)

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if c.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise NotFound("session", f"session {session_id} not found")
                try:
                    c.execute("INSERT INTO turns (id, session_id, input, status, usage, model, client_tools,"
                              " created_at, runner_id, last_n) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                              (t.id, session_id, input, t.usage.model_dump_json(), model, tools,
                               t.created_at, self.runner_id, first.n if first is not None else 0))
                except sqlite3.IntegrityError as exc:
                    _open_conflict(c, exc, session_id)
                if first is not None:
                    self._insert_events(c, (first,))

        await self._run(op)
        return t

    @staticmethod
    def _blocks(c: sqlite3.Connection, turn_id: str) -> list[Block]:
        return [parse_block(r[0]) for r in
                c.execute("SELECT content FROM blocks WHERE turn_id = ? ORDER BY seq", (turn_id,))]

    def _turns(self, c: sqlite3.Connection, session_id: str) -> list[Turn]:
        rows = c.execute(f"SELECT {TURN_COLS} FROM turns WHERE session_id = ? ORDER BY rowid",
                         (session_id,)).fetchall()
        by_turn: dict[str, list[Block]] = {r[0]: [] for r in rows}
        for tid, content in c.execute(
                "SELECT b.turn_id, b.content FROM blocks b JOIN turns t ON t.id = b.turn_id"
                " WHERE t.session_id = ? ORDER BY b.turn_id, b.seq", (session_id,)):
            by_turn[tid].append(parse_block(content))
        return [turn_from_row(r, by_turn[r[0]]) for r in rows]

    async def get_turn(self, turn_id: str) -> Turn | None:
        def op(c: sqlite3.Connection) -> Turn | None:
            with _read(c):
                row = c.execute(f"SELECT {TURN_COLS} FROM turns WHERE id = ?", (turn_id,)).fetchone()
                return turn_from_row(row, self._blocks(c, turn_id)) if row else None

        return await self._run(op)

    async def list_turns(self, session_id: str) -> list[Turn]:
        def op(c: sqlite3.Connection) -> list[Turn]:
            with _read(c):
                return self._turns(c, session_id)

        return await self._run(op)

    async def client_tools(self, turn_id: str) -> list[dict[str, Any]]:
        row = await self._run(lambda c: c.execute("SELECT client_tools FROM turns WHERE id = ?",
                                                  (turn_id,)).fetchone())
        return list(orjson.loads(row[0])) if row else []

    # The guarded update at the heart of every write to a turn: it advances the turn's
    # counters only if the block's seq is the next one and the event's n is above the last,
    # and applies an optional status change. No row updated means the write is refused.
    # The status columns are only named when the status changes: SQLite maintains the
    # indexes on every column a SET names, and most writes (block after block) keep it.
    # ?6 is the lowest event number the write stores (its first pending event, or its own).
    # A running turn takes writes from its own runner only (``TurnTakenOver`` otherwise).
    _ADVANCE = ("UPDATE turns SET next_seq = coalesce(?1, next_seq - 1) + 1, last_n = ?2{status}"
                " WHERE id = ?5 AND (?1 IS NULL OR next_seq = ?1) AND last_n < ?6"
                " AND (status <> 'running' OR runner_id IS ?4)")
    _ADVANCE_COUNTERS = _ADVANCE.format(status="")
    _ADVANCE_STATUS = _ADVANCE.format(
        status=", status = ?3, runner_id = CASE WHEN ?3 = 'running' THEN ?4 ELSE runner_id END")

    def _advance(self, c: sqlite3.Connection, turn_id: str, seq: int | None, n: int,
                 status: TurnStatus | None, first: int) -> None:
        sql = self._ADVANCE_COUNTERS if status is None else self._ADVANCE_STATUS
        try:
            updated = c.execute(sql, (seq, n, status, self.runner_id, turn_id, first)).rowcount
        except sqlite3.IntegrityError as exc:
            sid = c.execute("SELECT session_id FROM turns WHERE id = ?", (turn_id,)).fetchone()[0]
            _open_conflict(c, exc, sid)
        if updated != 1:
            _refused(c, turn_id, seq, first, self.runner_id)

    @staticmethod
    def _insert_events(c: sqlite3.Connection, events: Sequence[StoredEvent]) -> None:
        c.executemany("INSERT INTO turn_events (turn_id, n, name, data) VALUES (?, ?, ?, ?)",
                      [(e.turn_id, e.n, e.name, dumps(e.data)) for e in events])

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        row = block_row(turn_id, block)
        first = check_pending(turn_id, pending, event)
        assert first is not None

        ends_call = isinstance(block, ToolResultBlock)

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                self._advance(c, turn_id, block.seq, event.n, status, first)
                c.execute("INSERT INTO blocks (turn_id, seq, step, block_type, text_content, content)"
                          " VALUES (?, ?, ?, ?, ?, ?)", row)
                self._insert_events(c, (*pending, event))
                if ends_call:  # the ledger row of a server tool's call, if it has one, ends here
                    assert isinstance(block, ToolResultBlock)
                    c.execute("UPDATE tool_calls SET state = 'finished', ended_at = coalesce(ended_at, ?),"
                              " is_error = ? WHERE turn_id = ? AND tool_use_id = ?",
                              (time.time(), block.is_error, turn_id, block.tool_use_id))

        await self._run_grouped(op)

    async def discard_step(self, turn_id: str, step: int) -> None:
        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if c.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
                    raise NotFound("turn", f"turn {turn_id} not found")
                c.execute("DELETE FROM blocks WHERE turn_id = ? AND step = ?", (turn_id, step))
                c.execute("UPDATE turns SET next_seq = (SELECT coalesce(max(seq) + 1, 0) FROM blocks"
                          " WHERE turn_id = ?1) WHERE id = ?1", (turn_id,))

        await self._run(op)

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        first = check_pending(event.turn_id, pending, event)
        assert first is not None

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                self._advance(c, event.turn_id, None, event.n, status, first)
                self._insert_events(c, (*pending, event))

        await self._run_grouped(op)

    async def events_after(self, turn_id: str, n: int) -> list[StoredEvent]:
        rows = await self._run(lambda c: c.execute(
            "SELECT n, name, data FROM turn_events WHERE turn_id = ? AND n > ? ORDER BY n",
            (turn_id, n)).fetchall())
        return [event_from_row(turn_id, r) for r in rows]

    async def last_event_n(self, turn_id: str) -> int:
        row = await self._run(lambda c: c.execute("SELECT last_n FROM turns WHERE id = ?",
                                                  (turn_id,)).fetchone())
        return int(row[0]) if row else 0

    _SET_STATUS = ("UPDATE turns SET status = ?1,"
                   " runner_id = CASE WHEN ?1 = 'running' THEN ?2 ELSE runner_id END WHERE id = ?3")

    async def set_status(self, turn_id: str, status: TurnStatus) -> None:
        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if self._status(c, turn_id, status, None) != 1:
                    raise NotFound("turn", f"turn {turn_id} not found")

        await self._run(op)

    def _status(self, c: sqlite3.Connection, turn_id: str, status: TurnStatus,
                expected: TurnStatus | None) -> int:
        sql = self._SET_STATUS + ("" if expected is None else " AND status = ?4")
        args: tuple[Any, ...] = (status, self.runner_id, turn_id) + (() if expected is None else (expected,))
        try:
            return c.execute(sql, args).rowcount
        except sqlite3.IntegrityError as exc:
            sid = c.execute("SELECT session_id FROM turns WHERE id = ?", (turn_id,)).fetchone()[0]
            _open_conflict(c, exc, sid)

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            with _write(c):
                return self._status(c, turn_id, new, expected) == 1

        return await self._run(op)

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, stop_reason: TurnStopReason | None, usage: Usage,
        steps: int, error: str | None = None, event: StoredEvent | None = None,
        step_usage: Sequence[Usage] = (), pending: Sequence[StoredEvent] = (),
    ) -> None:
        usage_json = usage_to_json(usage, step_usage)
        first = check_pending(turn_id, pending, event)

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if event is not None:
                    assert first is not None
                    self._advance(c, turn_id, None, event.n, status, first)
                    self._insert_events(c, (*pending, event))
                elif self._status(c, turn_id, status, None) != 1:
                    raise NotFound("turn", f"turn {turn_id} not found")
                c.execute("UPDATE turns SET stop_reason = ?, usage = ?, steps = ?, error = ? WHERE id = ?",
                          (stop_reason, usage_json, steps, error, turn_id))

        await self._run_grouped(op)

    # recovery --------------------------------------------------------------
    def _beat(self, c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO runners (id, heartbeat_at) VALUES (?1, ?2)"
                  " ON CONFLICT (id) DO UPDATE SET heartbeat_at = ?2", (self.runner_id, time.time()))

    async def heartbeat(self) -> None:
        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                self._beat(c)

        await self._run(op)

    async def dead_runners(self, *, stale_after: float | None = None) -> set[str]:
        def op(c: sqlite3.Connection) -> list[tuple[str | None, float | None]]:
            return c.execute("SELECT DISTINCT t.runner_id, r.heartbeat_at FROM turns t LEFT JOIN runners r"
                             " ON r.id = t.runner_id WHERE t.status = 'running' AND t.runner_id IS NOT ?",
                             (self.runner_id,)).fetchall()

        rows = await self._run(op)
        now = time.time()
        dead: set[str] = set()
        for runner, beat in rows:
            if runner is None:
                continue
            if not self._lock.alive(runner) or (stale_after is not None and (beat or 0.0) < now - stale_after):
                dead.add(runner)
        return dead

    async def adopt_turns(self, runners: Collection[str]) -> list[str]:
        names = sorted(runners)
        if not names:
            return []
        marks = ", ".join("?" * len(names))

        def op(c: sqlite3.Connection) -> list[str]:
            with _write(c):
                rows = c.execute(f"UPDATE turns SET runner_id = ? WHERE status = 'running' AND runner_id IN ({marks})"
                                 " RETURNING id", (self.runner_id, *names)).fetchall()
                c.execute(f"DELETE FROM runners WHERE id IN ({marks})", names)
                return [r[0] for r in rows]

        ids = await self._run(op)
        for name in names:
            self._lock.forget(name)
        return ids

    # the tool-effect ledger --------------------------------------------------
    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                row = c.execute("SELECT status, runner_id FROM turns WHERE id = ?", (turn_id,)).fetchone()
                if row is None:
                    raise NotFound("turn", f"turn {turn_id} not found")
                if row[0] == "running" and row[1] != self.runner_id:  # fenced, as every write of the turn
                    raise TurnTakenOver(turn_id)
                c.executemany(
                    "INSERT INTO tool_calls (turn_id, tool_use_id, tool, idempotency_key, state, started_at)"
                    " VALUES (?1, ?2, ?3, ?4, 'started', ?5) ON CONFLICT (turn_id, tool_use_id) DO UPDATE SET"
                    " state = 'started', attempts = attempts + 1, started_at = ?5, ended_at = NULL, is_error = NULL,"
                    " result = NULL",
                    [(turn_id, x.tool_use_id, x.tool, x.idempotency_key, now) for x in calls])

        await self._run(op)

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if c.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
                    raise NotFound("turn", f"turn {turn_id} not found")
                c.execute("UPDATE tool_calls SET state = 'finished', ended_at = ?, is_error = ?, result = ?"
                          " WHERE turn_id = ? AND tool_use_id = ?", (now, is_error, result, turn_id, tool_use_id))

        await self._run(op)

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        rows = await self._run(lambda c: c.execute(
            "SELECT tool_use_id, tool, idempotency_key, state, attempts, started_at, ended_at, is_error, result"
            " FROM tool_calls WHERE turn_id = ? ORDER BY started_at, rowid", (turn_id,)).fetchall())
        return [ToolCallRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], None if r[7] is None else bool(r[7]), r[8])
                for r in rows]

    # the audit trail ----------------------------------------------------------
    async def record_tool_decisions(self, turn_id: str, decisions: Sequence[ToolDecision]) -> None:
        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if c.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
                    raise NotFound("turn", f"turn {turn_id} not found")
                c.executemany(
                    "INSERT OR REPLACE INTO tool_decisions (turn_id, tool_use_id, tool, approved, source, decided_by,"
                    " decided_at, reason, always) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(turn_id, d.tool_use_id, d.tool, int(d.approved), d.source, d.decided_by, d.decided_at,
                      d.reason, int(d.always)) for d in decisions])

        await self._run(op)

    async def tool_decisions(self, turn_id: str) -> list[ToolDecision]:
        rows = await self._run(lambda c: c.execute(
            "SELECT tool_use_id, tool, approved, source, decided_by, decided_at, reason, always"
            " FROM tool_decisions WHERE turn_id = ? ORDER BY decided_at, rowid", (turn_id,)).fetchall())
        return [ToolDecision(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6], bool(r[7])) for r in rows]

    async def grant_tool(self, session_id: str, tool: str, granted_by: str) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if c.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise NotFound("session", f"session {session_id} not found")
                c.execute("INSERT INTO tool_grants (session_id, tool, granted_by, granted_at) VALUES (?, ?, ?, ?)"
                          " ON CONFLICT (session_id, tool) DO NOTHING", (session_id, tool, granted_by, now))

        await self._run(op)

    async def tool_grants(self, session_id: str) -> list[ToolGrant]:
        rows = await self._run(lambda c: c.execute(
            "SELECT tool, granted_by, granted_at FROM tool_grants WHERE session_id = ? ORDER BY tool",
            (session_id,)).fetchall())
        return [ToolGrant(r[0], r[1], r[2]) for r in rows]

    # budgets ---------------------------------------------------------------
    async def charge_step(self, turn_id: str, step: int, scopes: Sequence[str], tokens: int,
                          nano_usd: int) -> dict[str, Spend] | None:
        now = time.time()

        def op(c: sqlite3.Connection) -> dict[str, Spend] | None:
            with _write(c):
                if c.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
                    raise NotFound("turn", f"turn {turn_id} not found")
                if c.execute("INSERT INTO budget_charges (turn_id, step, tokens, nano_usd) VALUES (?, ?, ?, ?)"
                             " ON CONFLICT DO NOTHING", (turn_id, step, tokens, nano_usd)).rowcount == 0:
                    return None
                out: dict[str, Spend] = {}
                for scope in scopes:
                    row = c.execute(
                        "INSERT INTO budget_counters (scope, tokens, nano_usd, updated_at) VALUES (?1, ?2, ?3, ?4)"
                        " ON CONFLICT (scope) DO UPDATE SET tokens = tokens + ?2, nano_usd = nano_usd + ?3,"
                        " updated_at = ?4 RETURNING tokens, nano_usd, granted_tokens, granted_nano_usd",
                        (scope, tokens, nano_usd, now)).fetchone()
                    out[scope] = Spend(*row)
                return out

        return await self._run(op)

    async def budget_spend(self, scopes: Sequence[str]) -> dict[str, Spend]:
        def op(c: sqlite3.Connection) -> dict[str, Spend]:
            marks = ", ".join("?" * len(scopes))
            rows = c.execute(f"SELECT scope, tokens, nano_usd, granted_tokens, granted_nano_usd"
                             f" FROM budget_counters WHERE scope IN ({marks})", tuple(scopes)).fetchall()
            found = {r[0]: Spend(*r[1:]) for r in rows}
            return {scope: found.get(scope, Spend()) for scope in scopes}

        return await self._run(op)

    async def grant_budget(self, scope: str, tokens: int, nano_usd: int) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                c.execute("INSERT INTO budget_counters (scope, granted_tokens, granted_nano_usd, updated_at)"
                          " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (scope) DO UPDATE SET"
                          " granted_tokens = granted_tokens + ?2, granted_nano_usd = granted_nano_usd + ?3,"
                          " updated_at = ?4", (scope, tokens, nano_usd, now))

        await self._run(op)

    # notebooks -------------------------------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        text = dumps(doc)

        def op(c: sqlite3.Connection) -> int:
            with _write(c):
                if c.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise NotFound("session", f"session {session_id} not found")
                if base is not None:
                    stored = c.execute("SELECT version FROM notebooks WHERE session_id = ?", (session_id,)).fetchone()
                    if (stored[0] if stored else 0) != base:
                        raise StaleNotebook(session_id, base)
                row = c.execute(
                    "INSERT INTO notebooks (session_id, doc, version, updated_at) VALUES (?1, ?2, 1, ?3)"
                    " ON CONFLICT (session_id) DO UPDATE SET doc = ?2, version = notebooks.version + 1,"
                    " updated_at = ?3 RETURNING version", (session_id, text, time.time())).fetchone()
                return int(row[0])

        return await self._run(op)

    async def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        row = await self._run(lambda c: c.execute("SELECT doc, version FROM notebooks WHERE session_id = ?",
                                                  (session_id,)).fetchone())
        return {**orjson.loads(row[0]), "version": row[1]} if row else None

    async def runner_alive(self, runner_id: str) -> bool:
        return self._lock.alive(runner_id)

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        record = NotebookFile(name, len(data), hashlib.sha256(data).hexdigest(), info, time.time())

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                if c.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                    raise NotFound("session", f"session {session_id} not found")
                others = c.execute("SELECT coalesce(sum(size), 0) FROM notebook_files WHERE session_id = ?"
                                   " AND name <> ?", (session_id, name)).fetchone()[0]
                check_files_total(name, len(data), int(others), max_total)
                c.execute("INSERT INTO notebook_files (session_id, name, size, sha256, info, data, created_at)"
                          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (session_id, name) DO UPDATE SET"
                          " size = ?3, sha256 = ?4, info = ?5, data = ?6, created_at = ?7",
                          (session_id, name, record.size, record.sha256, dumps(info), data, record.created_at))

        await self._run(op)
        return record

    async def notebook_files(self, session_id: str) -> list[NotebookFile]:
        rows = await self._run(lambda c: c.execute(
            "SELECT name, size, sha256, info, created_at FROM notebook_files WHERE session_id = ? ORDER BY name",
            (session_id,)).fetchall())
        return [NotebookFile(r[0], r[1], r[2], orjson.loads(r[3]), r[4]) for r in rows]

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None:
        row = await self._run(lambda c: c.execute(
            "SELECT data FROM notebook_files WHERE session_id = ? AND name = ?", (session_id, name)).fetchone())
        return bytes(row[0]) if row else None

    async def delete_notebook_file(self, session_id: str, name: str) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            with _write(c):
                return c.execute("DELETE FROM notebook_files WHERE session_id = ? AND name = ?",
                                 (session_id, name)).rowcount == 1

        return await self._run(op)

    async def put_blob(self, data: bytes, media_type: str) -> str:
        sha = hashlib.sha256(data).hexdigest()

        def op(c: sqlite3.Connection) -> None:
            with _write(c):
                c.execute("INSERT INTO blobs (sha256, media_type, size, data, created_at) VALUES (?, ?, ?, ?, ?)"
                          " ON CONFLICT (sha256) DO NOTHING", (sha, media_type, len(data), data, time.time()))

        await self._run(op)
        return sha

    async def get_blobs(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        rows = await self._run(lambda c: c.execute(f"SELECT sha256, data FROM blobs WHERE sha256 IN ({marks})",
                                                   wanted).fetchall())
        return {r[0]: bytes(r[1]) for r in rows}

    async def queue_message(self, session_id: str, text: str,
                            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        now = time.time()
        refs = [a.model_dump(mode="json") for a in attachments]

        def op(c: sqlite3.Connection) -> int | None:
            with _write(c):  # one writer at a time: the turn cannot end between the check and the insert
                if c.execute("SELECT 1 FROM turns WHERE session_id = ? AND status = 'running'",
                             (session_id,)).fetchone() is None:
                    return None
                cur = c.execute("INSERT INTO queued_messages (session_id, text, attachments, created_at)"
                                " VALUES (?, ?, ?, ?)", (session_id, text, dumps(refs), now))
                return cur.lastrowid

        qid = await self._run(op)
        if qid is None:
            return None
        return QueuedMessage(qid, session_id, text, [a.model_copy() for a in attachments], now)

    async def take_queued(self, session_id: str) -> list[QueuedMessage]:
        def op(c: sqlite3.Connection) -> list[Any]:
            # Asked at every step boundary and mostly empty: a read says so without a write
            # transaction (a message queued just after it is taken at the next boundary).
            if c.execute("SELECT 1 FROM queued_messages WHERE session_id = ? LIMIT 1",
                         (session_id,)).fetchone() is None:
                return []
            with _write(c):
                return c.execute("DELETE FROM queued_messages WHERE session_id = ?"
                                 " RETURNING id, text, attachments, created_at", (session_id,)).fetchall()

        rows = sorted(await self._run(op))
        return [QueuedMessage(r[0], session_id, r[1], [Attachment.model_validate(a) for a in orjson.loads(r[2])],
                              r[3]) for r in rows]
