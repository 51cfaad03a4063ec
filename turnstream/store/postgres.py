"""PostgreSQL store on asyncpg, shareable by several server processes.

Why asyncpg: the client's CPU per store call, which an agent turn pays about 13 times. The
guarded block write (``append_block`` of a 2 KB tool_use block, one statement) took about
half the client CPU with asyncpg (67–94 µs per call) as with psycopg 3 (131–182 µs),
measured interleaved on one machine; ``create_session`` and ``create_turn`` about 40 %
less (105–160 µs → 53–88 µs). asyncpg's protocol and parameter encoding are compiled
(Cython), where psycopg runs several Python layers per statement, and asyncpg keeps each
statement prepared per connection (its statement cache, on by default), so a repeated
statement is only bound and executed. asyncpg takes positional ``$n`` parameters; the
statements below that are composed from fragments are written with named ``%(name)s``
parameters for readability and turned into the positional form once, at import (``_Sql``).

Connections come from a small pool of our own (``pg.py`` says why). Outside an explicit
``conn.transaction()`` every statement commits on its own: most writes are one statement,
which PostgreSQL makes atomic on its own, and the few multi-statement writes open an
explicit transaction.

Concurrency rules, all enforced by the database rather than by this process:

* Every write to a turn is one ``UPDATE turns … WHERE id = … AND next_seq = <seq> AND
  last_n < <n>`` that advances the turn's counters, joined by data-modifying CTEs to the
  inserts of the block and its event. The UPDATE takes the turn's row lock, so writes to one
  turn are serialised and commit in number order; the guard refuses a taken seq or a stale
  n, so a refused write leaves nothing behind. A reader tailing ``events_after`` therefore
  sees numbers appear in order and never skips one.
* ``turns_one_open_per_session``, a partial unique index, lets at most one turn per
  session be open: of two concurrent ``create_turn`` calls exactly one commits.
* ``claim_turn`` is a guarded UPDATE: of concurrent claims exactly one sees ``UPDATE 1``.
* Heartbeats and staleness use the database clock, so servers need not agree on the time.

JSON columns come back as the text PostgreSQL holds (asyncpg's default for ``json``) and are
parsed once, by pydantic or orjson; JSON parameters are sent as text with a ``::json`` cast.

Why one module of this size: every statement of the store protocol for PostgreSQL, and
the guards they share, in one place; the connection plumbing is in ``pg.py``, the bus in
``postgres_bus.py``, the statements common to both SQL stores in ``_sql.py``.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, cast

import asyncpg
import orjson
from asyncpg.exceptions import ForeignKeyViolationError, UniqueViolationError

from ..blocks import (
    BLOCKS_ADAPTER,
    Attachment,
    Block,
    Session,
    ToolResultBlock,
    Turn,
    TurnStatus,
    TurnStopReason,
    Usage,
)
from ..errors import (
    AlreadyExists,
    InvalidValue,
    NotFound,
    SeqConflictError,
    StaleNotebook,
    StoreError,
    TurnConflictError,
    TurnTakenOver,
    UserExists,
)
from ..settings import DatabaseURL
from ._sql import (
    SCHEMA_MIGRATIONS,
    SESSION_COLS,
    TURN_COLS,
    agents_json,
    block_row,
    dumps,
    event_from_row,
    migrations,
    session_from_row,
    turn_from_row,
    usage_to_json,
)
from .keys import hash_key, new_key
from .pg import ALIVE, LivenessLock, _Lease, _Pool
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

if TYPE_CHECKING:
    from .pg import Conn

Row: TypeAlias = Sequence[Any]  # an asyncpg Record, read by position

_MIGRATION_LOCK = 0x7475726E73747265  # pg_advisory_xact_lock key: b"turnstre"
_NOW = "extract(epoch FROM clock_timestamp())::float8"
_OPEN_INDEX = "turns_one_open_per_session"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def _rowcount(status: str) -> int:
    """The row count of a command tag (``UPDATE 1``, ``DELETE 0``, ``INSERT 0 1``)."""
    return int(status.rpartition(" ")[2])


_NAMED = re.compile(r"%\((\w+)\)s")


class _Sql:
    """A statement written with named ``%(name)s`` parameters, in asyncpg's ``$n`` form.

    Converted once, when the class body runs: each distinct name becomes one ``$n`` (a name
    used twice is one parameter, so PostgreSQL infers one type for it), and ``args`` puts a
    dict of values in that order."""

    __slots__ = ("names", "text")

    def __init__(self, sql: str) -> None:
        numbers: dict[str, int] = {}

        def number(m: re.Match[str]) -> str:
            return f"${numbers.setdefault(m[1], len(numbers) + 1)}"

        self.text = _NAMED.sub(number, sql)
        self.names = tuple(numbers)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        return [params[name] for name in self.names]


class PostgresStore:
    """The Store protocol on PostgreSQL. ``url`` is a ``postgresql://`` URL in libpq's form
    (host, port, user, password, database; query parameters such as ``sslmode``,
    ``connect_timeout`` or ``options``)."""

    def __init__(self, url: str, *, pool_size: int = 4, runner_id: str | None = None) -> None:
        self.url = url
        self.runner_id = runner_id or _new_id("run")
        self._pool_size = pool_size
        self._pool: _Pool | None = None
        self._liveness = LivenessLock(url)

    # plumbing --------------------------------------------------------------
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
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            await conn.execute(SCHEMA_MIGRATIONS)
            done = {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}
            known = migrations("postgres")
            if done - {m.version for m in known}:
                raise StoreError(f"the database has migrations {sorted(done)} unknown to this turnstream;"
                                   " a newer version wrote it")
            for mig in known:
                if mig.version not in done:
                    # No arguments: the simple query protocol, which runs a script of several statements.
                    await conn.execute(mig.sql)
                    await conn.execute("INSERT INTO schema_migrations (version, name, applied_at)"
                                       " VALUES ($1, $2, $3)", mig.version, mig.name, time.time())

    async def aclose(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        try:
            async with pool.connection() as conn:
                await conn.execute("DELETE FROM runners WHERE id = $1", self.runner_id)
        finally:
            await self._liveness.release()
            await pool.aclose()

    def _conn(self) -> _Lease:
        """Borrow a connection: ``async with self._conn() as conn``."""
        if self._pool is None:
            raise StoreError("the store is not open: await store.open() first")
        return self._pool.connection()

    async def _one(self, sql: str, *args: Any) -> Row | None:
        async with self._conn() as conn:
            return cast("Row | None", await conn.fetchrow(sql, *args))

    async def _all(self, sql: str, *args: Any) -> list[Row]:
        async with self._conn() as conn:
            return cast("list[Row]", await conn.fetch(sql, *args))

    async def _count(self, sql: str, *args: Any) -> int:
        """Run a statement; the number of rows it changed."""
        async with self._conn() as conn:
            return _rowcount(await conn.execute(sql, *args))

    # users -----------------------------------------------------------------
    async def create_user(self, name: str) -> tuple[User, str]:
        user, key = User(id=_new_id("usr"), name=name), new_key()
        async with self._conn() as conn, conn.transaction():
            # Users are made rarely (a command, a first start): a table lock that other creators
            # wait for keeps the check and the insert together without a schema change.
            await conn.execute("LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE")
            if await conn.fetchval("SELECT 1 FROM users WHERE name = $1", name) is not None:
                raise UserExists(name)
            await conn.execute("INSERT INTO users (id, name, key_hash, created_at) VALUES ($1, $2, $3, $4)",
                               user.id, name, hash_key(key), time.time())
        return user, key

    async def user_by_key(self, api_key: str) -> User | None:
        row = await self._one("SELECT id, name FROM users WHERE key_hash = $1", hash_key(api_key))
        return User(id=row[0], name=row[1]) if row else None

    # sessions --------------------------------------------------------------
    async def create_session(
        self, user_id: str, *, title: str = "", model: str = "", toolset: str | None = None,
        session_id: str | None = None, agents: list[dict[str, Any]] | None = None,
        current_agent: str | None = None,
    ) -> Session:
        s = Session(id=session_id or _new_id("ses"), user_id=user_id, title=title, model=model,
                    toolset=toolset, created_at=time.time(), agents=agents, current_agent=current_agent)
        try:
            await self._count(f"INSERT INTO sessions ({SESSION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                              s.id, s.user_id, s.title, s.model, s.toolset, s.created_at, agents_json(agents),
                              current_agent)
        except UniqueViolationError:
            raise AlreadyExists(f"session {s.id} already exists") from None
        return s

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None:
        row = await self._one(f"SELECT {SESSION_COLS} FROM sessions WHERE id = $1", session_id)
        if row is None:
            return None
        s = session_from_row(row)
        if with_turns:
            s.turns = await self.list_turns(session_id)
        return s

    async def list_sessions(self, user_id: str) -> list[Session]:
        rows = await self._all(f"SELECT {SESSION_COLS} FROM sessions WHERE user_id = $1 ORDER BY ord", user_id)
        return [session_from_row(r) for r in rows]

    async def set_current_agent(self, session_id: str, name: str) -> bool:
        return await self._count("UPDATE sessions SET current_agent = $1 WHERE id = $2", name, session_id) == 1

    async def rename_session(self, session_id: str, title: str) -> bool:
        return await self._count("UPDATE sessions SET title = $1 WHERE id = $2", title, session_id) == 1

    async def delete_session(self, session_id: str) -> bool:
        return await self._count("DELETE FROM sessions WHERE id = $1", session_id) == 1

    # turns -----------------------------------------------------------------
    _OPEN_TURN = _Sql(
        "SELECT id FROM turns WHERE session_id = coalesce(%(sid)s, (SELECT session_id FROM turns"
        " WHERE id = %(tid)s)) AND id <> %(tid)s AND status IN ('running', 'awaiting_client')")

    async def _open_conflict(self, conn: Conn, exc: UniqueViolationError, turn_id: str,
                             session_id: str | None = None) -> NoReturn:
        """Map a violation of the one-open-turn index to TurnConflictError naming the open turn."""
        if exc.constraint_name != _OPEN_INDEX:
            raise exc
        sql = self._OPEN_TURN
        open_id = await conn.fetchval(sql.text, *sql.args({"sid": session_id, "tid": turn_id}))
        raise TurnConflictError(open_id or "?") from None

    _INSERT_TURN = ("INSERT INTO turns (id, session_id, input, status, usage, model, client_tools,"
                    " created_at, runner_id, last_n) VALUES (%(tid)s, %(sid)s, %(input)s, 'running', %(usage)s::json,"
                    " %(model)s, %(tools)s::json, %(at)s, %(runner)s, %(n)s)")
    _CREATE_TURN = _Sql(_INSERT_TURN)
    # With its first event, in the same statement (and so the same transaction).
    _CREATE_TURN_WITH_EVENT = _Sql(f"WITH t AS ({_INSERT_TURN} RETURNING id) INSERT INTO turn_events"
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
                await conn.execute(sql.text, *sql.args(params))
            except ForeignKeyViolationError:
                raise NotFound("session", f"session {session_id} not found") from None
            except UniqueViolationError as exc:
                await self._open_conflict(conn, exc, t.id, session_id)
        return t

    _TURNS = (f"SELECT {TURN_COLS}, (SELECT json_agg(b.content ORDER BY b.seq) FROM blocks b"
              f" WHERE b.turn_id = t.id) FROM turns t")

    @staticmethod
    def _turn(row: Row) -> Turn:
        return turn_from_row(row, BLOCKS_ADAPTER.validate_json(row[10]) if row[10] is not None else [])

    async def get_turn(self, turn_id: str) -> Turn | None:
        row = await self._one(self._TURNS + " WHERE t.id = $1", turn_id)
        return self._turn(row) if row else None

    async def list_turns(self, session_id: str) -> list[Turn]:
        rows = await self._all(self._TURNS + " WHERE t.session_id = $1 ORDER BY t.ord", session_id)
        return [self._turn(r) for r in rows]

    async def client_tools(self, turn_id: str) -> list[dict[str, Any]]:
        row = await self._one("SELECT client_tools FROM turns WHERE id = $1", turn_id)
        return list(orjson.loads(row[0])) if row else []

    # The guarded update that every write to a turn goes through (see the module docstring);
    # %(seq)s is NULL for writes that add no block, %(first)s the lowest event number the
    # write stores (its first pending event, or its own). The inserts hang off its RETURNING
    # row, so when the guard refuses, nothing is inserted. PostgreSQL gives each $n one type,
    # from its first use (the WHERE clause is read before SET): where that use cannot tell
    # (``IS NULL``, a bare value in a SELECT list, which would become text) a cast says it.
    _ADVANCE = (
        "WITH t AS (UPDATE turns SET next_seq = coalesce(%(seq)s, next_seq - 1) + 1, last_n = %(n)s,"
        " status = coalesce(%(status)s, status),"
        " runner_id = CASE WHEN %(status)s = 'running' THEN %(runner)s ELSE runner_id END{outcome}"
        " WHERE id = %(tid)s AND (%(seq)s::integer IS NULL OR next_seq = %(seq)s) AND last_n < %(first)s"
        " AND (status <> 'running' OR runner_id IS NOT DISTINCT FROM %(runner)s::text)"
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
                     " SELECT id, %(seq)s, %(step)s::integer, %(type)s, %(text)s, %(content)s::json"
                     " FROM t)")
    # A tool result ends its call's row in the tool-effect ledger, if it has one.
    _END_CALL = (", l AS (UPDATE tool_calls SET state = 'finished', ended_at = coalesce(tool_calls.ended_at,"
                 " %(now)s), is_error = %(is_error)s"
                 " FROM t WHERE tool_calls.turn_id = t.id AND tool_calls.tool_use_id = %(call)s)")
    _COUNT = " SELECT count(*) FROM t"
    _APPEND_BLOCK = (_Sql(_ADVANCE.format(outcome="") + _INSERT_EVENT + _INSERT_BLOCK + _COUNT),
                     _Sql(_ADVANCE.format(outcome="") + _INSERT_EVENTS + _INSERT_BLOCK + _COUNT))
    _APPEND_RESULT = (_Sql(_ADVANCE.format(outcome="") + _INSERT_EVENT + _INSERT_BLOCK + _END_CALL + _COUNT),
                      _Sql(_ADVANCE.format(outcome="") + _INSERT_EVENTS + _INSERT_BLOCK + _END_CALL + _COUNT))
    _APPEND_EVENT = (_Sql(_ADVANCE.format(outcome="") + _INSERT_EVENT + _COUNT),
                     _Sql(_ADVANCE.format(outcome="") + _INSERT_EVENTS + _COUNT))
    _FINISH = (_Sql(_ADVANCE.format(outcome=_OUTCOME) + _INSERT_EVENT + _COUNT),
               _Sql(_ADVANCE.format(outcome=_OUTCOME) + _INSERT_EVENTS + _COUNT))

    @staticmethod
    def _events(sql: tuple[_Sql, _Sql], params: dict[str, Any], pending: Sequence[StoredEvent],
                event: StoredEvent) -> _Sql:
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

    async def _guarded(self, sql: _Sql, params: dict[str, Any]) -> None:
        """Run a guarded write; explain a refusal (unknown turn, taken seq, stale n)."""
        tid, seq, n = params["tid"], params["seq"], params["first"]
        async with self._conn() as conn:
            try:
                if await conn.fetchval(sql.text, *sql.args(params)) == 1:
                    return
            except UniqueViolationError as exc:
                await self._open_conflict(conn, exc, tid)
            state = await conn.fetchrow("SELECT next_seq, last_n, status, runner_id FROM turns WHERE id = $1", tid)
        if state is None:
            raise NotFound("turn", f"turn {tid} not found")
        if state[2] == "running" and state[3] != self.runner_id:
            raise TurnTakenOver(tid)
        if seq is not None and seq != state[0]:
            raise SeqConflictError(f"block seq {seq} is not the next seq {state[0]} of {tid}")
        raise SeqConflictError(f"event {n} is not above the last event {state[1]} of {tid}")

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        if event.turn_id != turn_id:
            raise InvalidValue("event", f"event of turn {event.turn_id} given with a block of turn {turn_id}")
        _, seq, step, btype, text, content = block_row(turn_id, block)
        params: dict[str, Any] = {"tid": turn_id, "seq": seq, "status": status, "runner": self.runner_id,
                                  "step": step, "type": btype, "text": text, "content": content}
        sql = self._APPEND_BLOCK
        # (A ledger row's id never holds NUL, which PostgreSQL text cannot: such a result has none.)
        if isinstance(block, ToolResultBlock) and "\x00" not in block.tool_use_id:
            sql = self._APPEND_RESULT
            params |= {"now": time.time(), "is_error": block.is_error, "call": block.tool_use_id}
        await self._guarded(self._events(sql, params, pending, event), params)

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        params: dict[str, Any] = {"tid": event.turn_id, "seq": None, "status": status, "runner": self.runner_id}
        await self._guarded(self._events(self._APPEND_EVENT, params, pending, event), params)

    async def discard_step(self, turn_id: str, step: int) -> None:
        async with self._conn() as conn, conn.transaction():
            if await conn.fetchval("SELECT 1 FROM turns WHERE id = $1 FOR UPDATE", turn_id) is None:
                raise NotFound("turn", f"turn {turn_id} not found")
            await conn.execute("DELETE FROM blocks WHERE turn_id = $1 AND step = $2", turn_id, step)
            await conn.execute("UPDATE turns SET next_seq = (SELECT coalesce(max(seq) + 1, 0) FROM blocks"
                               " WHERE turn_id = $1) WHERE id = $1", turn_id)

    async def events_after(self, turn_id: str, n: int) -> list[StoredEvent]:
        rows = await self._all("SELECT n, name, data FROM turn_events WHERE turn_id = $1 AND n > $2"
                               " ORDER BY n", turn_id, n)
        return [event_from_row(turn_id, r) for r in rows]

    async def last_event_n(self, turn_id: str) -> int:
        row = await self._one("SELECT last_n FROM turns WHERE id = $1", turn_id)
        return int(row[0]) if row else 0

    _SET_STATUS = ("UPDATE turns SET status = %(status)s,"
                   " runner_id = CASE WHEN %(status)s = 'running' THEN %(runner)s ELSE runner_id END"
                   " WHERE id = %(tid)s")
    _SET = _Sql(_SET_STATUS)
    _CLAIM = _Sql(_SET_STATUS + " AND status = %(expected)s")
    _SET_OUTCOME = _Sql(_SET_STATUS.replace(" WHERE", _OUTCOME + " WHERE"))

    async def _status(self, turn_id: str, status: TurnStatus, sql: _Sql,
                      params: dict[str, Any] | None = None) -> int:
        """Run one of the status updates above; the number of rows changed."""
        params = (params or {}) | {"status": status, "runner": self.runner_id, "tid": turn_id}
        async with self._conn() as conn:
            try:
                return _rowcount(await conn.execute(sql.text, *sql.args(params)))
            except UniqueViolationError as exc:
                await self._open_conflict(conn, exc, turn_id)

    async def set_status(self, turn_id: str, status: TurnStatus) -> None:
        if await self._status(turn_id, status, self._SET) != 1:
            raise NotFound("turn", f"turn {turn_id} not found")

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        return await self._status(turn_id, new, self._CLAIM, {"expected": expected}) == 1

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, stop_reason: TurnStopReason | None, usage: Usage,
        steps: int, error: str | None = None, event: StoredEvent | None = None,
        step_usage: Sequence[Usage] = (), pending: Sequence[StoredEvent] = (),
    ) -> None:
        check_pending(turn_id, pending, event)
        params: dict[str, Any] = {"tid": turn_id, "stop": stop_reason, "usage": usage_to_json(usage, step_usage),
                                  "steps": steps, "error": error, "status": status, "runner": self.runner_id}
        if event is None:
            if await self._status(turn_id, status, self._SET_OUTCOME, params) != 1:
                raise NotFound("turn", f"turn {turn_id} not found")
            return
        # One statement: the guarded counter update, the events, and the outcome columns.
        params["seq"] = None
        await self._guarded(self._events(self._FINISH, params, pending, event), params)

    # recovery --------------------------------------------------------------
    async def _beat(self, conn: Conn) -> None:
        await conn.execute(f"INSERT INTO runners (id, heartbeat_at, lock_key) VALUES ($1, {_NOW}, $2)"
                           " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,"
                           " lock_key = excluded.lock_key", self.runner_id, self._liveness.key)

    async def heartbeat(self) -> None:
        async with self._conn() as conn:
            await self._beat(conn)

    async def dead_runners(self, *, stale_after: float | None = None) -> set[str]:
        # A runner with no row (it closed its store) or no lock key holds nothing.
        rows = await self._all(
            "SELECT DISTINCT t.runner_id FROM turns t LEFT JOIN runners r ON r.id = t.runner_id"
            " WHERE t.status = 'running' AND t.runner_id IS DISTINCT FROM $1 AND t.runner_id IS NOT NULL"
            f" AND (r.lock_key IS NULL OR NOT {ALIVE}"
            f" OR ($2::float8 IS NOT NULL AND r.heartbeat_at < {_NOW} - $2::float8))",
            self.runner_id, None if stale_after is None else float(stale_after))
        return {r[0] for r in rows}

    async def adopt_turns(self, runners: Collection[str]) -> list[str]:
        names = sorted(runners)
        if not names:
            return []
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch("UPDATE turns SET runner_id = $1 WHERE status = 'running'"
                                    " AND runner_id = ANY($2::text[]) RETURNING id", self.runner_id, names)
            await conn.execute("DELETE FROM runners WHERE id = ANY($1::text[])", names)
        return [r[0] for r in rows]

    # the tool-effect ledger --------------------------------------------------
    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        # Fenced like every write of a running turn: only its owner records that a call starts
        # (a process cut off while another took the turn over must not run the call again).
        async with self._conn() as conn:
            owned = await conn.fetchval(
                "WITH t AS (SELECT id FROM turns WHERE id = $1 AND (status <> 'running' OR runner_id = $2)),"
                " i AS (INSERT INTO tool_calls (turn_id, tool_use_id, tool, idempotency_key, state, started_at)"
                " SELECT t.id, v.u, v.tool, v.k, 'started', $3 FROM t,"
                " unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS v (u, tool, k, i)"
                " ON CONFLICT (turn_id, tool_use_id) DO UPDATE SET"
                " state = 'started', attempts = tool_calls.attempts + 1, started_at = excluded.started_at,"
                " ended_at = NULL, is_error = NULL, result = NULL RETURNING 1)"
                " SELECT count(*) FROM t",
                turn_id, self.runner_id, time.time(), [x.tool_use_id for x in calls], [x.tool for x in calls],
                [x.idempotency_key for x in calls])
            if owned == 1:
                return
            exists = await conn.fetchval("SELECT count(*) FROM turns WHERE id = $1", turn_id)
        if not exists:
            raise NotFound("turn", f"turn {turn_id} not found")
        raise TurnTakenOver(turn_id)

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        async with self._conn() as conn:
            done = await conn.fetchval(
                "WITH t AS (SELECT id FROM turns WHERE id = $1), u AS (UPDATE tool_calls SET state = 'finished',"
                " ended_at = $3, is_error = $4, result = $5 FROM t WHERE tool_calls.turn_id = t.id"
                " AND tool_calls.tool_use_id = $2) SELECT count(*) FROM t",
                turn_id, tool_use_id, time.time(), is_error, result)
        if done != 1:
            raise NotFound("turn", f"turn {turn_id} not found")

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        rows = await self._all("SELECT tool_use_id, tool, idempotency_key, state, attempts, started_at, ended_at,"
                               " is_error, result FROM tool_calls WHERE turn_id = $1 ORDER BY started_at", turn_id)
        return [ToolCallRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]) for r in rows]

    # the audit trail ----------------------------------------------------------
    async def record_tool_decisions(self, turn_id: str, decisions: Sequence[ToolDecision]) -> None:
        try:
            async with self._conn() as conn:
                await conn.executemany(
                    "INSERT INTO tool_decisions (turn_id, tool_use_id, tool, approved, source, decided_by, decided_at,"
                    " reason, always) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                    " ON CONFLICT (turn_id, tool_use_id) DO UPDATE SET tool = excluded.tool,"
                    " approved = excluded.approved, source = excluded.source, decided_by = excluded.decided_by,"
                    " decided_at = excluded.decided_at, reason = excluded.reason, always = excluded.always",
                    [(turn_id, d.tool_use_id, d.tool, d.approved, d.source, d.decided_by, d.decided_at, d.reason,
                      d.always) for d in decisions])
        except ForeignKeyViolationError:
            raise NotFound("turn", f"turn {turn_id} not found") from None

    async def tool_decisions(self, turn_id: str) -> list[ToolDecision]:
        rows = await self._all("SELECT tool_use_id, tool, approved, source, decided_by, decided_at, reason, always"
                               " FROM tool_decisions WHERE turn_id = $1 ORDER BY decided_at", turn_id)
        return [ToolDecision(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows]

    async def grant_tool(self, session_id: str, tool: str, granted_by: str) -> None:
        try:
            async with self._conn() as conn:
                await conn.execute("INSERT INTO tool_grants (session_id, tool, granted_by, granted_at)"
                                   " VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, tool) DO NOTHING",
                                   session_id, tool, granted_by, time.time())
        except ForeignKeyViolationError:
            raise NotFound("session", f"session {session_id} not found") from None

    async def tool_grants(self, session_id: str) -> list[ToolGrant]:
        rows = await self._all("SELECT tool, granted_by, granted_at FROM tool_grants WHERE session_id = $1"
                               " ORDER BY tool", session_id)
        return [ToolGrant(r[0], r[1], r[2]) for r in rows]
    # budgets ---------------------------------------------------------------
    async def charge_step(self, turn_id: str, step: int, scopes: Sequence[str], tokens: int,
                          nano_usd: int) -> dict[str, Spend] | None:
        now = time.time()
        try:
            async with self._conn() as conn, conn.transaction():
                done = await conn.fetchrow(
                    "INSERT INTO budget_charges (turn_id, step, tokens, nano_usd) VALUES ($1, $2, $3, $4)"
                    " ON CONFLICT DO NOTHING RETURNING step", turn_id, step, tokens, nano_usd)
                if done is None:
                    return None
                out: dict[str, Spend] = {}
                for scope in sorted(scopes):  # one row-locking statement each, in one order: none lost, no deadlock
                    row = await conn.fetchrow(
                        "INSERT INTO budget_counters (scope, tokens, nano_usd, updated_at) VALUES ($1, $2, $3, $4)"
                        " ON CONFLICT (scope) DO UPDATE SET tokens = budget_counters.tokens + excluded.tokens,"
                        " nano_usd = budget_counters.nano_usd + excluded.nano_usd, updated_at = excluded.updated_at"
                        " RETURNING tokens, nano_usd, granted_tokens, granted_nano_usd", scope, tokens, nano_usd, now)
                    assert row is not None
                    out[scope] = Spend(row[0], row[1], row[2], row[3])
                return out
        except ForeignKeyViolationError:
            raise NotFound("turn", f"turn {turn_id} not found") from None

    async def budget_spend(self, scopes: Sequence[str]) -> dict[str, Spend]:
        rows = await self._all("SELECT scope, tokens, nano_usd, granted_tokens, granted_nano_usd FROM budget_counters"
                               " WHERE scope = ANY($1::text[])", list(scopes))
        found = {r[0]: Spend(r[1], r[2], r[3], r[4]) for r in rows}
        return {scope: found.get(scope, Spend()) for scope in scopes}

    async def grant_budget(self, scope: str, tokens: int, nano_usd: int) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO budget_counters (scope, granted_tokens, granted_nano_usd, updated_at)"
                " VALUES ($1, $2, $3, $4) ON CONFLICT (scope) DO UPDATE SET"
                " granted_tokens = budget_counters.granted_tokens + excluded.granted_tokens,"
                " granted_nano_usd = budget_counters.granted_nano_usd + excluded.granted_nano_usd,"
                " updated_at = excluded.updated_at", scope, tokens, nano_usd, time.time())

    # notebooks -------------------------------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        # With a base: the first save inserts only where none is stored (base 0), a later one
        # updates only while the stored version is still the base; no row back is a refusal.
        if base is None:
            sql = ("INSERT INTO notebooks (session_id, doc, version, updated_at) VALUES ($1, $2::json, 1, $3)"
                   " ON CONFLICT (session_id) DO UPDATE SET doc = excluded.doc,"
                   " version = notebooks.version + 1, updated_at = excluded.updated_at RETURNING version")
        elif base == 0:
            sql = ("INSERT INTO notebooks (session_id, doc, version, updated_at) VALUES ($1, $2::json, 1, $3)"
                   " ON CONFLICT (session_id) DO NOTHING RETURNING version")
        else:
            sql = ("UPDATE notebooks SET doc = $2::json, version = version + 1, updated_at = $3"
                   " WHERE session_id = $1 AND version = $4 RETURNING version")
        args = (session_id, dumps(doc), time.time(), *(() if not base else (base,)))
        try:
            row = await self._one(sql, *args)
        except ForeignKeyViolationError:
            raise NotFound("session", f"session {session_id} not found") from None
        if row is None:
            assert base is not None
            if await self._one("SELECT 1 FROM sessions WHERE id = $1", session_id) is None:
                raise NotFound("session", f"session {session_id} not found")
            raise StaleNotebook(session_id, base)
        return int(row[0])

    async def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        row = await self._one("SELECT doc, version FROM notebooks WHERE session_id = $1", session_id)
        return {**orjson.loads(row[0]), "version": row[1]} if row else None

    async def runner_alive(self, runner_id: str) -> bool:
        if runner_id == self.runner_id:
            return True
        row = await self._one(f"SELECT {ALIVE} FROM runners r WHERE r.id = $1 AND r.lock_key IS NOT NULL", runner_id)
        return bool(row and row[0])

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        record = NotebookFile(name, len(data), hashlib.sha256(data).hexdigest(), info, time.time())
        async with self._conn() as conn, conn.transaction():
            # The session's row lock serialises uploads to one session, so the total holds.
            if await conn.fetchval("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", session_id) is None:
                raise NotFound("session", f"session {session_id} not found")
            others = await conn.fetchval("SELECT coalesce(sum(size), 0) FROM notebook_files WHERE session_id = $1"
                                         " AND name <> $2", session_id, name)
            check_files_total(name, len(data), int(others), max_total)
            await conn.execute(
                "INSERT INTO notebook_files (session_id, name, size, sha256, info, data, created_at)"
                " VALUES ($1, $2, $3, $4, $5::json, $6, $7) ON CONFLICT (session_id, name) DO UPDATE SET"
                " size = excluded.size, sha256 = excluded.sha256, info = excluded.info, data = excluded.data,"
                " created_at = excluded.created_at",
                session_id, name, record.size, record.sha256, dumps(info), data, record.created_at)
        return record

    async def notebook_files(self, session_id: str) -> list[NotebookFile]:
        rows = await self._all("SELECT name, size, sha256, info, created_at FROM notebook_files"
                               " WHERE session_id = $1 ORDER BY name", session_id)
        return [NotebookFile(r[0], int(r[1]), r[2], orjson.loads(r[3]), r[4]) for r in rows]

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None:
        row = await self._one("SELECT data FROM notebook_files WHERE session_id = $1 AND name = $2", session_id, name)
        return bytes(row[0]) if row else None

    async def delete_notebook_file(self, session_id: str, name: str) -> bool:
        return await self._count("DELETE FROM notebook_files WHERE session_id = $1 AND name = $2",
                                 session_id, name) == 1

    async def put_blob(self, data: bytes, media_type: str) -> str:
        sha = hashlib.sha256(data).hexdigest()
        async with self._conn() as conn:
            await conn.execute("INSERT INTO blobs (sha256, media_type, size, data, created_at)"
                               " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
                               sha, media_type, len(data), data, time.time())
        return sha

    async def get_blobs(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = await self._all("SELECT sha256, data FROM blobs WHERE sha256 = ANY($1::text[])", wanted)
        return {r[0]: bytes(r[1]) for r in rows}

    async def queue_message(self, session_id: str, text: str,
                            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        now = time.time()
        refs = [a.model_dump(mode="json") for a in attachments]
        async with self._conn() as conn, conn.transaction():
            # The share lock holds the running turn's row until this commits: the turn cannot
            # end (and its runner look for queued messages) between the check and the insert.
            if await conn.fetchval("SELECT 1 FROM turns WHERE session_id = $1 AND status = 'running' FOR SHARE",
                                   session_id) is None:
                return None
            qid = await conn.fetchval("INSERT INTO queued_messages (session_id, text, attachments, created_at)"
                                      " VALUES ($1, $2, $3::json, $4) RETURNING id", session_id, text, dumps(refs), now)
        return QueuedMessage(int(qid), session_id, text, [a.model_copy() for a in attachments], now)

    async def take_queued(self, session_id: str) -> list[QueuedMessage]:
        rows = await self._all("DELETE FROM queued_messages WHERE session_id = $1"
                               " RETURNING id, text, attachments, created_at", session_id)
        return [QueuedMessage(int(r[0]), session_id, r[1],
                              [Attachment.model_validate(a) for a in orjson.loads(r[2])], r[3])
                for r in sorted(rows, key=lambda r: int(r[0]))]
