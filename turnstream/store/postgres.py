"""PostgreSQL store on asyncpg, shareable by several server processes.

Why asyncpg: the client's CPU per store call, which an agent turn pays about 13 times. The
guarded block write (``append_block`` of a 2 KB tool_use block, one statement) took about
half the client CPU with asyncpg (67–94 µs per call) as with psycopg 3 (131–182 µs),
measured interleaved on one machine; ``create_session`` and ``create_turn`` about 40 %
less (105–160 µs → 53–88 µs). asyncpg's protocol and parameter encoding are compiled
(Cython), where psycopg runs several Python layers per statement, and asyncpg keeps each
statement prepared per connection (its statement cache, on by default), so a repeated
statement is only bound and executed. Its statements (``statements.py``) take positional
``$n`` parameters, so a call passes its values as they are, with no mapping to build.

Connections come from a small pool of our own (``pg.py`` says why). Outside an explicit
``conn.transaction()`` every statement commits on its own: most writes are one statement,
which PostgreSQL makes atomic on its own, and the few multi-statement writes open an
explicit transaction. A turn's guarded writes (blocks, events, its end) use half the pool at
most; those that queue behind them go to the database together, as one statement
(``pg_batch.py``), and each is answered as it would have been alone.

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

The statements are in ``statements.py``, the rows' mapping in ``rows.py``, the operations
of one statement that both SQL stores share in ``sqlbase.py``, the connections in ``pg.py``,
the bus in ``postgres_bus.py``; here are the operations with a transaction, a lock or a
guard of PostgreSQL's.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, cast

from asyncpg.exceptions import ForeignKeyViolationError, UniqueViolationError

from ..blocks import BLOCKS_ADAPTER, Attachment, Block, ToolResultBlock, Turn, TurnStatus, TurnStopReason, Usage
from ..errors import InvalidValue, NotFound, StaleNotebook, TurnConflictError, TurnTakenOver, UserExists
from . import rows
from .keys import hash_key, new_key
from .pg import PostgresConnection, rowcount
from .pg_batch import WriteBatcher
from .protocol import NotebookFile, QueuedMessage, User, check_files_total, check_pending, first_event_of
from .rows import Row, block_row, dumps, new_id, usage_to_json
from .sqlbase import SQLStore
from .statements import POSTGRES as Q

if TYPE_CHECKING:
    from .pg import Conn
    from .protocol import Spend, StoredEvent, ToolCallStart, ToolDecision

_OPEN_INDEX = "turns_one_open_per_session"


@dataclass(slots=True)
class _Write:
    """One guarded write to a turn: as it runs alone (``sql``, with ``args`` before its events)
    and, in a batch, as a row of ``statements.append_many``."""

    turn_id: str
    seq: int | None
    n: int
    status: TurnStatus | None
    first: int
    events: tuple[StoredEvent, ...]
    sql: tuple[str, str]
    args: tuple[Any, ...]
    outcome: tuple[Any, ...] | None = None
    """stop_reason, usage (JSON), steps, error: a write that finishes the turn."""
    block: tuple[Any, ...] | None = None
    """step, type, text, content (JSON)."""
    call: tuple[Any, ...] | None = None
    """ended_at, is_error, tool_use_id: the ledger row a tool result ends."""


_NO_OUTCOME: tuple[Any, ...] = (None,) * 4
_NO_BLOCK: tuple[Any, ...] = (None,) * 4
_NO_CALL: tuple[Any, ...] = (None,) * 3


class PostgresStore(PostgresConnection, SQLStore):
    """The Store protocol on PostgreSQL. ``url`` is a ``postgresql://`` URL in libpq's form
    (host, port, user, password, database; query parameters such as ``sslmode``,
    ``connect_timeout`` or ``options``)."""

    _q = Q

    def __init__(self, url: str, *, pool_size: int = 4, runner_id: str | None = None) -> None:
        super().__init__(url, pool_size=pool_size, runner_id=runner_id)
        # Half the pool for turn writes (the rest for reads and other writes); what queues
        # behind them goes in one statement (pg_batch).
        self._writes = WriteBatcher(self._write_one, self._write_many, lanes=pool_size // 2)

    async def aclose(self) -> None:
        await self._writes.drain()
        await super().aclose()

    @property
    def batched_writes(self) -> int:
        """Statements sent so far with the writes of several turns (``pg_batch``)."""
        return self._writes.batches

    # users -----------------------------------------------------------------
    async def create_user(self, name: str) -> tuple[User, str]:
        user, key = User(id=new_id("usr"), name=name), new_key()
        async with self._conn() as conn, conn.transaction():
            # Users are made rarely (a command, a first start): a table lock that other creators
            # wait for keeps the check and the insert together without a schema change.
            await conn.execute(Q.lock_users)
            if await conn.fetchval(Q.user_named, name) is not None:
                raise UserExists(name)
            await conn.execute(Q.insert_user, user.id, name, hash_key(key), time.time())
        return user, key

    # turns -----------------------------------------------------------------
    async def _open_conflict(self, conn: Conn, exc: UniqueViolationError, turn_id: str,
                             session_id: str | None = None) -> NoReturn:
        """Map a violation of the one-open-turn index to TurnConflictError naming the open turn."""
        if exc.constraint_name != _OPEN_INDEX:
            raise exc
        open_id = await conn.fetchval(Q.open_turn, session_id, turn_id)
        raise TurnConflictError(open_id or "?") from None

    async def create_turn(
        self, session_id: str, input: str, *, model: str, client_tools: list[dict[str, Any]] | None = None,
        first_event: Callable[[str], StoredEvent] | None = None, parent_turn_id: str | None = None,
    ) -> Turn:
        t = Turn(id=new_id("turn"), session_id=session_id, input=input, model=model, created_at=time.time())
        first = first_event_of(t.id, first_event)
        args: tuple[Any, ...] = (t.id, session_id, input, t.usage.model_dump_json(), model,
                                 dumps(client_tools or []), t.created_at, self.runner_id, 0, parent_turn_id)
        sql = Q.create_turn
        if first is not None:  # with its first event, in the same statement (and so the same transaction)
            sql = Q.create_turn_with_event
            args = (*args[:8], first.n, parent_turn_id, first.name, dumps(first.data))
        if parent_turn_id:  # turns are only ever deleted with their session
            await self._check_turn_of(session_id, parent_turn_id, "parent_turn_id")
        async with self._conn() as conn:
            try:
                t.parent_turn_id = await conn.fetchval(sql, *args)
            except ForeignKeyViolationError:
                raise NotFound("session", f"session {session_id} not found") from None
            except UniqueViolationError as exc:
                await self._open_conflict(conn, exc, t.id, session_id)
        return t

    @staticmethod
    def _turn(row: Row) -> Turn:
        return rows.turn(row, BLOCKS_ADAPTER.validate_json(row[11]) if row[11] is not None else [])

    async def get_turn(self, turn_id: str) -> Turn | None:
        row = await self._row(Q.turn, turn_id)
        return self._turn(row) if row else None

    async def list_turns(self, session_id: str) -> list[Turn]:
        return [self._turn(r) for r in await self._rows(Q.turns_of, session_id)]

    async def _write_one(self, w: _Write) -> None:
        """A guarded write alone (``statements.PostgresStatements``: its arguments before its
        events are ``w.args``); explain a refusal (unknown turn, taken seq, stale n, taken over)."""
        if len(w.events) > 1:
            text, args = w.sql[1], (*w.args, [e.n for e in w.events], [e.name for e in w.events],
                                    [dumps(e.data) for e in w.events])
        else:
            text, args = w.sql[0], (*w.args, w.events[0].name, dumps(w.events[0].data))
        async with self._conn() as conn:
            try:
                if await conn.fetchval(text, *args) == 1:
                    return
            except UniqueViolationError as exc:
                await self._open_conflict(conn, exc, w.turn_id)
            state = cast("Row | None", await conn.fetchrow(Q.turn_state, w.turn_id))
        raise rows.refusal(state, w.turn_id, w.seq, w.first, self.runner_id)

    async def _write_many(self, ws: Sequence[_Write]) -> set[str]:
        """Guarded writes of distinct turns in one statement (``pg_batch``); the turns whose
        guard passed. The others stored nothing."""
        outcomes = [w.outcome or _NO_OUTCOME for w in ws]
        blocks = [w.block or _NO_BLOCK for w in ws]
        calls = [w.call or _NO_CALL for w in ws]
        events = [(w.turn_id, e) for w in ws for e in w.events]
        async with self._conn() as conn:
            applied = await conn.fetchval(
                Q.append_many, self.runner_id, [w.turn_id for w in ws], [w.seq for w in ws], [w.n for w in ws],
                [w.status for w in ws], [w.first for w in ws], [w.outcome is not None for w in ws],
                *([o[i] for o in outcomes] for i in range(4)), *([b[i] for b in blocks] for i in range(4)),
                *([c[i] for c in calls] for i in range(3)), [t for t, _ in events], [e.n for _, e in events],
                [e.name for _, e in events], [dumps(e.data) for _, e in events])
        return set(applied)

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        if event.turn_id != turn_id:
            raise InvalidValue("event", f"event of turn {event.turn_id} given with a block of turn {turn_id}")
        first = check_pending(turn_id, pending, event)
        assert first is not None
        _, seq, step, btype, text, content = block_row(turn_id, block)
        args: tuple[Any, ...] = (seq, event.n, status, self.runner_id, turn_id, first, step, btype, text, content)
        sql, call = Q.append_block, None
        # (A ledger row's id never holds NUL, which PostgreSQL text cannot: such a result has none.)
        if isinstance(block, ToolResultBlock) and "\x00" not in block.tool_use_id:
            sql, call = Q.append_result, (time.time(), block.is_error, block.tool_use_id)
            args = (*args, *call)
        await self._writes.write(_Write(turn_id, seq, event.n, status, first, (*pending, event), sql, args,
                                        block=(step, btype, text, content), call=call))

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        tid = event.turn_id
        first = check_pending(tid, pending, event)
        assert first is not None
        await self._writes.write(_Write(tid, None, event.n, status, first, (*pending, event), Q.append_event,
                                        (None, event.n, status, self.runner_id, tid, first)))

    async def discard_step(self, turn_id: str, step: int) -> None:
        async with self._conn() as conn, conn.transaction():
            if await conn.fetchval(Q.turn_locked, turn_id) is None:
                raise NotFound("turn", f"turn {turn_id} not found")
            await conn.execute(Q.discard_blocks, turn_id, step)
            await conn.execute(Q.renumber, turn_id)

    async def _status(self, sql: str, turn_id: str, *args: Any) -> int:
        """Run a status update of turn ``turn_id``; the number of rows changed."""
        async with self._conn() as conn:
            try:
                return rowcount(await conn.execute(sql, *args))
            except UniqueViolationError as exc:
                await self._open_conflict(conn, exc, turn_id)

    async def set_status(self, turn_id: str, status: TurnStatus) -> None:
        if await self._status(Q.set_status, turn_id, status, self.runner_id, turn_id) != 1:
            raise NotFound("turn", f"turn {turn_id} not found")

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        return await self._status(Q.claim, turn_id, new, self.runner_id, turn_id, expected) == 1

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, stop_reason: TurnStopReason | None, usage: Usage,
        steps: int, error: str | None = None, event: StoredEvent | None = None,
        step_usage: Sequence[Usage] = (), pending: Sequence[StoredEvent] = (),
    ) -> None:
        outcome = (stop_reason, usage_to_json(usage, step_usage), steps, error)
        first = check_pending(turn_id, pending, event)
        if event is None:
            if await self._status(Q.set_outcome, turn_id, status, self.runner_id, turn_id, *outcome) != 1:
                raise NotFound("turn", f"turn {turn_id} not found")
            return
        # One statement: the guarded counter update with the outcome columns, and the events.
        assert first is not None
        await self._writes.write(_Write(turn_id, None, event.n, status, first, (*pending, event), Q.finish,
                                        (None, event.n, status, self.runner_id, turn_id, first, *outcome),
                                        outcome=outcome))

    # recovery --------------------------------------------------------------
    async def heartbeat(self) -> None:
        async with self._conn() as conn:
            await self._beat(conn)

    async def dead_runners(self, *, stale_after: float | None = None) -> set[str]:
        stale = None if stale_after is None else float(stale_after)
        return {r[0] for r in await self._rows(Q.dead_runners, self.runner_id, stale)}

    async def adopt_turns(self, runners: Collection[str]) -> list[str]:
        names = sorted(runners)
        if not names:
            return []
        async with self._conn() as conn, conn.transaction():
            adopted = await conn.fetch(Q.adopt, self.runner_id, names)
            await conn.execute(Q.delete_runners, names)
        return [r[0] for r in adopted]

    async def runner_alive(self, runner_id: str) -> bool:
        if runner_id == self.runner_id:
            return True
        row = await self._row(Q.runner_alive, runner_id)
        return bool(row and row[0])

    # the tool-effect ledger and the audit trail --------------------------------
    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        # Fenced like every write of a running turn: only its owner records that a call starts
        # (a process cut off while another took the turn over must not run the call again).
        async with self._conn() as conn:
            owned = await conn.fetchval(Q.start_calls, turn_id, self.runner_id, time.time(),
                                        [x.tool_use_id for x in calls], [x.tool for x in calls],
                                        [x.idempotency_key for x in calls])
            if owned == 1:
                return
            exists = await conn.fetchval(Q.turn_count, turn_id)
        if not exists:
            raise NotFound("turn", f"turn {turn_id} not found")
        raise TurnTakenOver(turn_id)

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        async with self._conn() as conn:
            done = await conn.fetchval(Q.end_tool_call, turn_id, tool_use_id, time.time(), is_error, result)
        if done != 1:
            raise NotFound("turn", f"turn {turn_id} not found")

    async def record_tool_decisions(self, turn_id: str, decisions: Sequence[ToolDecision]) -> None:
        try:
            async with self._conn() as conn:
                await conn.executemany(Q.record_decision, [rows.decision_row(turn_id, d) for d in decisions])
        except ForeignKeyViolationError:
            raise NotFound("turn", f"turn {turn_id} not found") from None

    async def grant_tool(self, session_id: str, tool: str, granted_by: str) -> None:
        try:
            await self._change(Q.grant_tool, session_id, tool, granted_by, time.time())
        except ForeignKeyViolationError:
            raise NotFound("session", f"session {session_id} not found") from None

    # budgets ---------------------------------------------------------------
    async def charge_step(self, turn_id: str, step: int, scopes: Sequence[str], tokens: int,
                          nano_usd: int) -> dict[str, Spend] | None:
        now = time.time()
        try:
            async with self._conn() as conn, conn.transaction():
                if rowcount(await conn.execute(Q.charge, turn_id, step, tokens, nano_usd)) == 0:
                    return None
                out: dict[str, Spend] = {}
                for scope in sorted(scopes):  # one row-locking statement each, in one order: none lost, no deadlock
                    row = cast("Row", await conn.fetchrow(Q.add_spend, scope, tokens, nano_usd, now))
                    out[scope] = rows.spend(row)
                return out
        except ForeignKeyViolationError:
            raise NotFound("turn", f"turn {turn_id} not found") from None

    # notebooks and queued messages ---------------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        if base is None:
            sql = Q.save_notebook
        elif base == 0:
            sql = Q.save_first_notebook
        else:
            sql = Q.save_notebook_on
        args = (session_id, dumps(doc), time.time(), *(() if not base else (base,)))
        try:
            row = await self._row(sql, *args)
        except ForeignKeyViolationError:
            raise NotFound("session", f"session {session_id} not found") from None
        if row is None:  # a save on a base that is no longer the stored version, or no session
            assert base is not None
            if await self._row(Q.session_exists, session_id) is None:
                raise NotFound("session", f"session {session_id} not found")
            raise StaleNotebook(session_id, base)
        return int(row[0])

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        record = NotebookFile(name, len(data), hashlib.sha256(data).hexdigest(), info, time.time())
        async with self._conn() as conn, conn.transaction():
            # The session's row lock serialises uploads to one session, so the total holds.
            if await conn.fetchval(Q.session_locked, session_id) is None:
                raise NotFound("session", f"session {session_id} not found")
            others = await conn.fetchval(Q.files_total, session_id, name)
            check_files_total(name, len(data), int(others), max_total)
            await conn.execute(Q.put_file, session_id, name, record.size, record.sha256, dumps(info), data,
                               record.created_at)
        return record

    async def queue_message(self, session_id: str, text: str,
                            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        now = time.time()
        refs = [a.model_dump(mode="json") for a in attachments]
        async with self._conn() as conn, conn.transaction():
            # The share lock holds the running turn's row until this commits: the turn cannot
            # end (and its runner look for queued messages) between the check and the insert.
            if await conn.fetchval(Q.running_turn_held, session_id) is None:
                return None
            qid = await conn.fetchval(Q.queue, session_id, text, dumps(refs), now)
        return QueuedMessage(int(qid), session_id, text, [a.model_copy() for a in attachments], now)

    async def take_queued(self, session_id: str) -> list[QueuedMessage]:
        return rows.queued(session_id, await self._rows(Q.take_queued, session_id))
