"""PostgreSQL store on psycopg 3 (async), shareable by several server processes.

Connections: a small pool of our own (``pool_size``, default 4) rather than one
connection behind a lock. One connection would queue every turn of the process behind the
slowest statement of any of them, and a transaction waiting on a row lock (another process
holding the same turn) would stall the whole process. A few connections let concurrent
turns write side by side while keeping the server's connection count bounded. The
connections run in autocommit mode: most writes are one statement, which PostgreSQL makes
atomic on its own, and the few multi-statement writes open an explicit transaction.

Concurrency rules, all enforced by the database rather than by this process:

* Every write to a turn is one ``UPDATE turns … WHERE id = … AND next_seq = <seq> AND
  last_n < <n>`` that advances the turn's counters, joined by data-modifying CTEs to the
  inserts of the block and its event. The UPDATE takes the turn's row lock, so writes to one
  turn are serialised and commit in number order; the guard refuses a taken seq or a stale
  n, so a refused write leaves nothing behind. A reader tailing ``events_after`` therefore
  sees numbers appear in order and never skips one.
* ``turns_one_open_per_session``, a partial unique index, lets at most one turn per
  session be open: of two concurrent ``create_turn`` calls exactly one commits.
* ``claim_turn`` is a guarded UPDATE: of concurrent claims exactly one sees ``rowcount 1``.
* Heartbeats and staleness use the database clock, so servers need not agree on the time.
"""

from __future__ import annotations

import asyncio
import select
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, NoReturn

import orjson
import psycopg
from psycopg import errors as pgerrors
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from ..blocks import BLOCKS_ADAPTER, Block, Session, Turn, TurnStatus, TurnStopReason, Usage
from ._sql import (
    SCHEMA_MIGRATIONS,
    SESSION_COLS,
    TURN_COLS,
    block_row,
    dumps,
    event_from_row,
    migrations,
    session_from_row,
    turn_from_row,
    usage_to_json,
)
from .keys import hash_key, new_key
from .protocol import SeqConflictError, StoredEvent, TurnConflictError, User, check_pending, first_event_of

Conn = psycopg.AsyncConnection[TupleRow]

_MIGRATION_LOCK = 0x7475726E73747265  # pg_advisory_xact_lock key: b"turnstre"
_NOW = "extract(epoch FROM clock_timestamp())::float8"
_OPEN_INDEX = "turns_one_open_per_session"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


class _JsonText(Loader):
    """Hand json columns over as their raw bytes: pydantic and orjson parse them in one pass,
    instead of psycopg building Python objects that we would validate again."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def _alive(conn: Conn) -> bool:
    """False for an idle connection the server has dropped, without a round trip: a healthy
    idle connection has nothing to read (we LISTEN to nothing), while one the server closed
    (a restart, an admin's ``pg_terminate_backend``) has its FATAL message and EOF waiting."""
    if conn.closed or conn.broken:
        return False
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


class _Pool:
    """At most ``size`` connections, each lent to one task at a time.

    After the server restarts, every idle connection is dead: each is found so before it is
    lent (``_alive``) and replaced by a new one, so the first operation after a restart works
    instead of failing on a stale socket. An operation that fails (the server went away
    mid-statement or mid-transaction) raises psycopg's ``OperationalError`` at once, and its
    connection is not reused. While the server is down, connecting fails at once (refused)
    or after ``connect_timeout`` (default 10 s), never hangs."""

    def __init__(self, url: str, size: int) -> None:
        self._url = url
        self._idle: list[Conn] = []
        self._slots = asyncio.Semaphore(size)
        self._closed = False
        self._connect_kw: dict[str, Any] = {} if "connect_timeout" in url else {"connect_timeout": 10}

    async def _connect(self) -> Conn:
        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, **self._connect_kw)
        conn.adapters.register_loader("json", _JsonText)
        return conn

    async def _take(self) -> Conn:
        while self._idle:
            conn = self._idle.pop()
            if _alive(conn):
                return conn
            await conn.close()
        return await self._connect()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        if self._closed:
            raise RuntimeError("the store is closed")
        async with self._slots:
            conn = await self._take()
            try:
                yield conn
            finally:
                # A connection left mid-transaction (a cancelled query) or broken is not reused.
                healthy = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
                if healthy and not self._closed:
                    self._idle.append(conn)
                else:
                    await conn.close()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


class PostgresStore:
    """The Store protocol on PostgreSQL. ``url`` is a libpq URL (``postgresql://…``)."""

    def __init__(self, url: str, *, pool_size: int = 4, runner_id: str | None = None) -> None:
        self.url = url
        self.runner_id = runner_id or _new_id("run")
        self._pool_size = pool_size
        self._pool: _Pool | None = None

    # plumbing --------------------------------------------------------------
    async def open(self) -> None:
        if self._pool is not None:
            return
        pool = _Pool(self.url, self._pool_size)
        try:
            async with pool.connection() as conn:
                await self._migrate(conn)
                await self._beat(conn)
        except BaseException:
            await pool.aclose()
            raise
        self._pool = pool

    @staticmethod
    async def _migrate(conn: Conn) -> None:
        async with conn.transaction():
            # Two processes opening a fresh database at once: the second waits here, then
            # finds the migrations recorded.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute(SCHEMA_MIGRATIONS)
            cur = await conn.execute("SELECT version FROM schema_migrations")
            done = {row[0] for row in await cur.fetchall()}
            known = migrations("postgres")
            if done - {m.version for m in known}:
                raise RuntimeError(f"the database has migrations {sorted(done)} unknown to this turnstream;"
                                   " a newer version wrote it")
            for mig in known:
                if mig.version not in done:
                    await conn.execute(mig.sql.encode())  # no parameters: may hold several statements
                    await conn.execute("INSERT INTO schema_migrations (version, name, applied_at)"
                                       " VALUES (%s, %s, %s)", (mig.version, mig.name, time.time()))

    async def aclose(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        try:
            async with pool.connection() as conn:
                await conn.execute("DELETE FROM runners WHERE id = %s", (self.runner_id,))
        finally:
            await pool.aclose()

    def _conn(self) -> AbstractAsyncContextManager[Conn]:
        """Borrow a connection: ``async with self._conn() as conn``."""
        if self._pool is None:
            raise RuntimeError("the store is not open: await store.open() first")
        return self._pool.connection()

    async def _one(self, sql: str, params: Any = None) -> tuple[Any, ...] | None:
        async with self._conn() as conn:
            cur = await conn.execute(sql, params)
            row: tuple[Any, ...] | None = await cur.fetchone()
            return row

    async def _all(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        async with self._conn() as conn:
            cur = await conn.execute(sql, params)
            rows: list[tuple[Any, ...]] = await cur.fetchall()
            return rows

    async def _count(self, sql: str, params: Any = None) -> int:
        async with self._conn() as conn:
            cur = await conn.execute(sql, params)
            return cur.rowcount

    # users -----------------------------------------------------------------
    async def create_user(self, name: str) -> tuple[User, str]:
        user, key = User(id=_new_id("usr"), name=name), new_key()
        await self._count("INSERT INTO users (id, name, key_hash, created_at) VALUES (%s, %s, %s, %s)",
                          (user.id, name, hash_key(key), time.time()))
        return user, key

    async def user_by_key(self, api_key: str) -> User | None:
        row = await self._one("SELECT id, name FROM users WHERE key_hash = %s", (hash_key(api_key),))
        return User(id=row[0], name=row[1]) if row else None

    # sessions --------------------------------------------------------------
    async def create_session(
        self, user_id: str, *, title: str = "", model: str = "", toolset: str | None = None,
        session_id: str | None = None,
    ) -> Session:
        s = Session(id=session_id or _new_id("ses"), user_id=user_id, title=title, model=model,
                    toolset=toolset, created_at=time.time())
        try:
            await self._count(f"INSERT INTO sessions ({SESSION_COLS}) VALUES (%s, %s, %s, %s, %s, %s)",
                              (s.id, s.user_id, s.title, s.model, s.toolset, s.created_at))
        except pgerrors.UniqueViolation:
            raise ValueError(f"session {s.id} already exists") from None
        return s

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None:
        row = await self._one(f"SELECT {SESSION_COLS} FROM sessions WHERE id = %s", (session_id,))
        if row is None:
            return None
        s = session_from_row(row)
        if with_turns:
            s.turns = await self.list_turns(session_id)
        return s

    async def list_sessions(self, user_id: str) -> list[Session]:
        rows = await self._all(f"SELECT {SESSION_COLS} FROM sessions WHERE user_id = %s ORDER BY ord",
                               (user_id,))
        return [session_from_row(r) for r in rows]

    async def delete_session(self, session_id: str) -> bool:
        return await self._count("DELETE FROM sessions WHERE id = %s", (session_id,)) == 1

    # turns -----------------------------------------------------------------
    async def _open_conflict(self, conn: Conn, exc: pgerrors.UniqueViolation, turn_id: str,
                             session_id: str | None = None) -> NoReturn:
        """Map a violation of the one-open-turn index to TurnConflictError naming the open turn."""
        if exc.diag.constraint_name != _OPEN_INDEX:
            raise exc
        cur = await conn.execute(
            "SELECT id FROM turns WHERE session_id = coalesce(%(sid)s, (SELECT session_id FROM turns"
            " WHERE id = %(tid)s)) AND id <> %(tid)s AND status IN ('running', 'awaiting_client')",
            {"sid": session_id, "tid": turn_id})
        row = await cur.fetchone()
        raise TurnConflictError(row[0] if row else "?") from None

    _CREATE_TURN = ("INSERT INTO turns (id, session_id, input, status, usage, model, client_tools,"
                    " created_at, runner_id, last_n) VALUES (%(tid)s, %(sid)s, %(input)s, 'running', %(usage)s::json,"
                    " %(model)s, %(tools)s::json, %(at)s, %(runner)s, %(n)s)")
    # With its first event, in the same statement (and so the same transaction).
    _CREATE_TURN_WITH_EVENT = (f"WITH t AS ({_CREATE_TURN} RETURNING id) INSERT INTO turn_events"
                               " (turn_id, n, name, data) SELECT id, %(n)s, %(name)s, %(data)s::json FROM t")

    async def create_turn(
        self, session_id: str, input: str, *, model: str, client_tools: list[dict[str, Any]] | None = None,
        first_event: Callable[[str], StoredEvent] | None = None,
    ) -> Turn:
        t = Turn(id=_new_id("turn"), session_id=session_id, input=input, model=model, created_at=time.time())
        first = first_event_of(t.id, first_event)
        params: dict[str, Any] = {
            "tid": t.id, "sid": session_id, "input": input, "usage": t.usage.model_dump_json(), "model": model,
            "tools": dumps(client_tools or []), "at": t.created_at, "runner": self.runner_id, "n": 0}
        sql = self._CREATE_TURN
        if first is not None:
            sql = self._CREATE_TURN_WITH_EVENT
            params |= {"n": first.n, "name": first.name, "data": dumps(first.data)}
        async with self._conn() as conn:
            try:
                await conn.execute(sql, params)
            except pgerrors.ForeignKeyViolation:
                raise KeyError(session_id) from None
            except pgerrors.UniqueViolation as exc:
                await self._open_conflict(conn, exc, t.id, session_id)
        return t

    _TURNS = (f"SELECT {TURN_COLS}, (SELECT json_agg(b.content ORDER BY b.seq) FROM blocks b"
              f" WHERE b.turn_id = t.id) FROM turns t")

    @staticmethod
    def _turn(row: tuple[Any, ...]) -> Turn:
        return turn_from_row(row, BLOCKS_ADAPTER.validate_json(row[10]) if row[10] is not None else [])

    async def get_turn(self, turn_id: str) -> Turn | None:
        row = await self._one(self._TURNS + " WHERE t.id = %s", (turn_id,))
        return self._turn(row) if row else None

    async def list_turns(self, session_id: str) -> list[Turn]:
        rows = await self._all(self._TURNS + " WHERE t.session_id = %s ORDER BY t.ord", (session_id,))
        return [self._turn(r) for r in rows]

    async def client_tools(self, turn_id: str) -> list[dict[str, Any]]:
        row = await self._one("SELECT client_tools FROM turns WHERE id = %s", (turn_id,))
        return list(orjson.loads(row[0])) if row else []

    # The guarded update that every write to a turn goes through (see the module docstring);
    # %(seq)s is NULL for writes that add no block, %(first)s the lowest event number the
    # write stores (its first pending event, or its own). The inserts hang off its RETURNING
    # row, so when the guard refuses, nothing is inserted.
    _ADVANCE = (
        "WITH t AS (UPDATE turns SET next_seq = coalesce(%(seq)s, next_seq - 1) + 1, last_n = %(n)s,"
        " status = coalesce(%(status)s, status),"
        " runner_id = CASE WHEN %(status)s = 'running' THEN %(runner)s ELSE runner_id END{outcome}"
        " WHERE id = %(tid)s AND (%(seq)s::integer IS NULL OR next_seq = %(seq)s) AND last_n < %(first)s"
        " RETURNING id)"
    )
    # The columns finish_turn sets (one UPDATE per row and statement: PostgreSQL would apply
    # only one of two updates of the same row made by one statement).
    _OUTCOME = (", stop_reason = %(stop)s, usage = %(usage)s::json, steps = %(steps)s,"
                " error = %(error)s")
    _INSERT_EVENT = (", e AS (INSERT INTO turn_events (turn_id, n, name, data)"
                     " SELECT id, %(n)s, %(name)s, %(data)s::json FROM t)")
    # The write's pending events and its own, as arrays (a write with pending events).
    _INSERT_EVENTS = (", e AS (INSERT INTO turn_events (turn_id, n, name, data)"
                      " SELECT t.id, v.n, v.name, v.data::json FROM t,"
                      " unnest(%(ns)s::bigint[], %(names)s::text[], %(datas)s::text[]) AS v (n, name, data))")
    _INSERT_BLOCK = (", b AS (INSERT INTO blocks (turn_id, seq, step, block_type, text_content, content)"
                     " SELECT id, %(seq)s, %(step)s, %(type)s, %(text)s, %(content)s::json FROM t)")
    _COUNT = " SELECT count(*) FROM t"
    _APPEND_BLOCK = (_ADVANCE.format(outcome="") + _INSERT_EVENT + _INSERT_BLOCK + _COUNT,
                     _ADVANCE.format(outcome="") + _INSERT_EVENTS + _INSERT_BLOCK + _COUNT)
    _APPEND_EVENT = (_ADVANCE.format(outcome="") + _INSERT_EVENT + _COUNT,
                     _ADVANCE.format(outcome="") + _INSERT_EVENTS + _COUNT)
    _FINISH = (_ADVANCE.format(outcome=_OUTCOME) + _INSERT_EVENT + _COUNT,
               _ADVANCE.format(outcome=_OUTCOME) + _INSERT_EVENTS + _COUNT)

    @staticmethod
    def _events(sql: tuple[str, str], params: dict[str, Any], pending: Sequence[StoredEvent],
                event: StoredEvent) -> str:
        """Add the parameters of the write's events to ``params``; the statement that stores them."""
        first = check_pending(event.turn_id, pending, event)
        params["n"], params["first"] = event.n, first
        if not pending:
            params["name"], params["data"] = event.name, dumps(event.data)
            return sql[0]
        events = (*pending, event)
        params["ns"] = [e.n for e in events]
        params["names"] = [e.name for e in events]
        params["datas"] = [dumps(e.data) for e in events]
        return sql[1]

    async def _guarded(self, sql: str, params: dict[str, Any]) -> None:
        """Run a guarded write; explain a refusal (unknown turn, taken seq, stale n)."""
        tid, seq, n = params["tid"], params.get("seq"), params["first"]
        async with self._conn() as conn:
            try:
                cur = await conn.execute(sql, params)
            except pgerrors.UniqueViolation as exc:
                await self._open_conflict(conn, exc, tid)
            row = await cur.fetchone()
            if row is not None and row[0] == 1:
                return
            cur = await conn.execute("SELECT next_seq, last_n FROM turns WHERE id = %s", (tid,))
            state = await cur.fetchone()
        if state is None:
            raise KeyError(tid)
        if seq is not None and seq != state[0]:
            raise SeqConflictError(f"block seq {seq} is not the next seq {state[0]} of {tid}")
        raise SeqConflictError(f"event {n} is not above the last event {state[1]} of {tid}")

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        if event.turn_id != turn_id:
            raise ValueError(f"event of turn {event.turn_id} given with a block of turn {turn_id}")
        _, seq, step, btype, text, content = block_row(turn_id, block)
        params: dict[str, Any] = {"tid": turn_id, "seq": seq, "status": status, "runner": self.runner_id,
                                  "step": step, "type": btype, "text": text, "content": content}
        await self._guarded(self._events(self._APPEND_BLOCK, params, pending, event), params)

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        params: dict[str, Any] = {"tid": event.turn_id, "seq": None, "status": status, "runner": self.runner_id}
        await self._guarded(self._events(self._APPEND_EVENT, params, pending, event), params)

    async def discard_step(self, turn_id: str, step: int) -> None:
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute("SELECT 1 FROM turns WHERE id = %s FOR UPDATE", (turn_id,))
            if await cur.fetchone() is None:
                raise KeyError(turn_id)
            await conn.execute("DELETE FROM blocks WHERE turn_id = %s AND step = %s", (turn_id, step))
            await conn.execute("UPDATE turns SET next_seq = (SELECT coalesce(max(seq) + 1, 0) FROM blocks"
                               " WHERE turn_id = %(tid)s) WHERE id = %(tid)s", {"tid": turn_id})

    async def events_after(self, turn_id: str, n: int) -> list[StoredEvent]:
        rows = await self._all("SELECT n, name, data FROM turn_events WHERE turn_id = %s AND n > %s"
                               " ORDER BY n", (turn_id, n))
        return [event_from_row(turn_id, r) for r in rows]

    async def last_event_n(self, turn_id: str) -> int:
        row = await self._one("SELECT last_n FROM turns WHERE id = %s", (turn_id,))
        return int(row[0]) if row else 0

    _SET_STATUS = ("UPDATE turns SET status = %(status)s,"
                   " runner_id = CASE WHEN %(status)s = 'running' THEN %(runner)s ELSE runner_id END"
                   " WHERE id = %(tid)s")

    async def _status(self, turn_id: str, status: TurnStatus, expected: TurnStatus | None,
                      sql: str = _SET_STATUS, params: dict[str, Any] | None = None) -> int:
        """Set a turn's status (only if it is ``expected``, when given); the number of rows changed."""
        sql += "" if expected is None else " AND status = %(expected)s"
        params = (params or {}) | {"status": status, "runner": self.runner_id, "tid": turn_id,
                                   "expected": expected}
        async with self._conn() as conn:
            try:
                cur = await conn.execute(sql, params)
            except pgerrors.UniqueViolation as exc:
                await self._open_conflict(conn, exc, turn_id)
            return cur.rowcount

    async def set_status(self, turn_id: str, status: TurnStatus) -> None:
        if await self._status(turn_id, status, None) != 1:
            raise KeyError(turn_id)

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        return await self._status(turn_id, new, expected) == 1

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, stop_reason: TurnStopReason | None, usage: Usage,
        steps: int, error: str | None = None, event: StoredEvent | None = None,
        step_usage: Sequence[Usage] = (), pending: Sequence[StoredEvent] = (),
    ) -> None:
        check_pending(turn_id, pending, event)
        params: dict[str, Any] = {"tid": turn_id, "stop": stop_reason, "usage": usage_to_json(usage, step_usage),
                                  "steps": steps, "error": error, "status": status, "runner": self.runner_id}
        if event is None:
            sql = self._SET_STATUS.replace(" WHERE", self._OUTCOME + " WHERE")
            if await self._status(turn_id, status, None, sql, params) != 1:
                raise KeyError(turn_id)
            return
        # One statement: the guarded counter update, the events, and the outcome columns.
        params["seq"] = None
        await self._guarded(self._events(self._FINISH, params, pending, event), params)

    # recovery --------------------------------------------------------------
    async def _beat(self, conn: Conn) -> None:
        await conn.execute(f"INSERT INTO runners (id, heartbeat_at) VALUES (%s, {_NOW})"
                           " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
                           (self.runner_id,))

    async def heartbeat(self) -> None:
        async with self._conn() as conn:
            await self._beat(conn)

    async def recover(self, *, stale_after: float | None = None) -> list[str]:
        if stale_after is None:
            rows = await self._all("UPDATE turns SET status = 'interrupted' WHERE status = 'running'"
                                   " RETURNING id")
        else:
            rows = await self._all(
                "UPDATE turns t SET status = 'interrupted' WHERE t.status = 'running'"
                " AND t.runner_id IS DISTINCT FROM %(me)s AND NOT EXISTS (SELECT 1 FROM runners r"
                f" WHERE r.id = t.runner_id AND r.heartbeat_at > {_NOW} - %(stale)s) RETURNING t.id",
                {"me": self.runner_id, "stale": float(stale_after)})
        return [r[0] for r in rows]

    # notebooks -------------------------------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any]) -> int:
        try:
            row = await self._one(
                "INSERT INTO notebooks (session_id, doc, version, updated_at)"
                " VALUES (%(sid)s, %(doc)s::json, 1, %(now)s)"
                " ON CONFLICT (session_id) DO UPDATE SET doc = excluded.doc,"
                " version = notebooks.version + 1, updated_at = excluded.updated_at RETURNING version",
                {"sid": session_id, "doc": dumps(doc), "now": time.time()})
        except pgerrors.ForeignKeyViolation:
            raise KeyError(session_id) from None
        assert row is not None
        return int(row[0])

    async def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        row = await self._one("SELECT doc FROM notebooks WHERE session_id = %s", (session_id,))
        return dict(orjson.loads(row[0])) if row else None
