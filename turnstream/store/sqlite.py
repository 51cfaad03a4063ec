"""SQLite store: one file, WAL, stdlib ``sqlite3``.

Every write runs in a ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock up
front; with ``busy_timeout`` that serialises writers across processes sharing the file as
well (``sqlite_conn.py``: the one connection, its fast path and grouped commits). A write of
several statements is therefore atomic and sees no other writer between its check and its
change. A write to a turn begins with the guarded update of the turn's counters
(``statements.py``), which refuses a taken seq, a stale n or a turn another runner owns.

The statements are in ``statements.py``, the rows' mapping in ``rows.py``, the operations of
one statement that both SQL stores share in ``sqlbase.py``; here are those that take a
transaction of SQLite's.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ..blocks import Attachment, Block, Session, ToolResultBlock, Turn, TurnStatus, TurnStopReason, Usage
from ..errors import NotFound, StaleNotebook, TurnConflictError, TurnTakenOver, UserExists
from . import rows
from .keys import hash_key, new_key
from .protocol import NotebookFile, QueuedMessage, User, check_files_total, check_pending, first_event_of
from .rows import block_row, dumps, new_id, usage_to_json
from .sqlbase import SQLStore, check_turn_of
from .sqlite_conn import SQLiteConnection, read, write
from .statements import SQLITE as Q

if TYPE_CHECKING:
    from .protocol import Spend, StoredEvent, ToolCallStart, ToolDecision


def _open_conflict(c: sqlite3.Connection, exc: sqlite3.IntegrityError, session_id: str | None,
                   turn_id: str) -> NoReturn:
    """Turn a violation of the one-open-turn index into TurnConflictError; re-raise others."""
    if "turns.session_id" not in str(exc):
        raise exc
    row = c.execute(Q.open_turn, (session_id, turn_id)).fetchone()
    raise TurnConflictError(row[0] if row else "?") from None


def _exists(c: sqlite3.Connection, sql: str, key: str, what: str) -> None:
    """``NotFound`` unless ``sql`` finds the session or turn ``key``."""
    if c.execute(sql, (key,)).fetchone() is None:
        raise NotFound(what, f"{what} {key} not found")


class SQLiteStore(SQLiteConnection, SQLStore):
    """The Store protocol on one SQLite file (``:memory:`` gives a private database)."""

    _q = Q

    # users and sessions --------------------------------------------------------
    async def create_user(self, name: str) -> tuple[User, str]:
        user, key = User(id=new_id("usr"), name=name), new_key()

        def op(c: sqlite3.Connection) -> None:
            with write(c):  # the write lock is held from here: no other writer between check and insert
                if c.execute(Q.user_named, (name,)).fetchone() is not None:
                    raise UserExists(name)
                c.execute(Q.insert_user, (user.id, name, hash_key(key), time.time()))

        await self._run(op)
        return user, key

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None:
        def op(c: sqlite3.Connection) -> Session | None:
            with read(c):  # the session and its turns from one snapshot
                found = c.execute(Q.session, (session_id,)).fetchone()
                s = None if found is None else rows.session(found)
                if s is not None and with_turns:
                    s.turns = self._turns(c, session_id)
                return s

        return await self._run(op)

    # turns -----------------------------------------------------------------
    async def create_turn(
        self, session_id: str, input: str, *, model: str, client_tools: list[dict[str, Any]] | None = None,
        first_event: Callable[[str], StoredEvent] | None = None, parent_turn_id: str | None = None,
    ) -> Turn:
        t = Turn(id=new_id("turn"), session_id=session_id, input=input, model=model, created_at=time.time())
        tools = dumps(client_tools or [])
        first = first_event_of(t.id, first_event)

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                leaf = c.execute(Q.session_leaf, (session_id,)).fetchone()
                if leaf is None:
                    raise NotFound("session", f"session {session_id} not found")
                if parent_turn_id:
                    check_turn_of(session_id, parent_turn_id, "parent_turn_id",
                                  c.execute(Q.turn_of_session, (session_id, parent_turn_id)).fetchone())
                t.parent_turn_id = leaf[0] if parent_turn_id is None else parent_turn_id or None
                try:
                    c.execute(Q.insert_turn, (t.id, session_id, input, t.usage.model_dump_json(), model, tools,
                                              t.created_at, self.runner_id, first.n if first is not None else 0,
                                              t.parent_turn_id or ""))
                except sqlite3.IntegrityError as exc:
                    _open_conflict(c, exc, session_id, t.id)
                c.execute(Q.set_leaf, (t.id, session_id))
                if first is not None:
                    self._insert_events(c, (first,))

        await self._run_grouped(op)
        return t

    def _turns(self, c: sqlite3.Connection, session_id: str) -> list[Turn]:
        found = c.execute(Q.turns_of, (session_id,)).fetchall()
        by_turn: dict[str, list[Block]] = {r[0]: [] for r in found}
        for tid, content in c.execute(Q.session_blocks, (session_id,)):
            by_turn[tid].append(rows.block(content))
        return [rows.turn(r, by_turn[r[0]]) for r in found]

    async def get_turn(self, turn_id: str) -> Turn | None:
        def op(c: sqlite3.Connection) -> Turn | None:
            with read(c):
                row = c.execute(Q.turn, (turn_id,)).fetchone()
                if row is None:
                    return None
                return rows.turn(row, [rows.block(b[0]) for b in c.execute(Q.blocks_of, (turn_id,))])

        return await self._run(op)

    async def list_turns(self, session_id: str) -> list[Turn]:
        def op(c: sqlite3.Connection) -> list[Turn]:
            with read(c):
                return self._turns(c, session_id)

        return await self._run(op)

    def _advance(self, c: sqlite3.Connection, turn_id: str, seq: int | None, n: int,
                 status: TurnStatus | None, first: int) -> None:
        """The guarded update of the turn's counters (and status) that begins every write to it."""
        sql = Q.advance_counters if status is None else Q.advance_status
        try:
            updated = c.execute(sql, (seq, n, status, self.runner_id, turn_id, first)).rowcount
        except sqlite3.IntegrityError as exc:
            _open_conflict(c, exc, None, turn_id)
        if updated != 1:
            raise rows.refusal(c.execute(Q.turn_state, (turn_id,)).fetchone(), turn_id, seq, first, self.runner_id)

    @staticmethod
    def _insert_events(c: sqlite3.Connection, events: Sequence[StoredEvent]) -> None:
        c.executemany(Q.insert_event, [(e.turn_id, e.n, e.name, dumps(e.data)) for e in events])

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        row = block_row(turn_id, block)
        first = check_pending(turn_id, pending, event)
        assert first is not None

        ends_call = isinstance(block, ToolResultBlock)

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                self._advance(c, turn_id, block.seq, event.n, status, first)
                c.execute(Q.insert_block, row)
                self._insert_events(c, (*pending, event))
                if ends_call:  # the ledger row of a server tool's call, if it has one, ends here
                    assert isinstance(block, ToolResultBlock)
                    c.execute(Q.end_call_of_result, (time.time(), block.is_error, turn_id, block.tool_use_id))

        await self._run_grouped(op)

    async def discard_step(self, turn_id: str, step: int) -> None:
        def op(c: sqlite3.Connection) -> None:
            with write(c):
                _exists(c, Q.turn_exists, turn_id, "turn")
                c.execute(Q.discard_blocks, (turn_id, step))
                c.execute(Q.renumber, (turn_id,))

        await self._run(op)

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        first = check_pending(event.turn_id, pending, event)
        assert first is not None

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                self._advance(c, event.turn_id, None, event.n, status, first)
                self._insert_events(c, (*pending, event))

        await self._run_grouped(op)

    async def set_status(self, turn_id: str, status: TurnStatus) -> None:
        def op(c: sqlite3.Connection) -> None:
            with write(c):
                if self._status(c, turn_id, status, None) != 1:
                    raise NotFound("turn", f"turn {turn_id} not found")

        await self._run(op)

    def _status(self, c: sqlite3.Connection, turn_id: str, status: TurnStatus,
                expected: TurnStatus | None) -> int:
        try:
            if expected is None:
                return c.execute(Q.set_status, (status, self.runner_id, turn_id)).rowcount
            return c.execute(Q.claim, (status, self.runner_id, turn_id, expected)).rowcount
        except sqlite3.IntegrityError as exc:
            _open_conflict(c, exc, None, turn_id)

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        def op(c: sqlite3.Connection) -> bool:
            with write(c):
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
            with write(c):
                if event is not None:
                    assert first is not None
                    self._advance(c, turn_id, None, event.n, status, first)
                    self._insert_events(c, (*pending, event))
                elif self._status(c, turn_id, status, None) != 1:
                    raise NotFound("turn", f"turn {turn_id} not found")
                c.execute(Q.outcome, (stop_reason, usage_json, steps, error, turn_id))

        await self._run_grouped(op)

    # recovery --------------------------------------------------------------
    async def heartbeat(self) -> None:
        def op(c: sqlite3.Connection) -> None:
            with write(c):
                self._beat(c)

        await self._run(op)

    async def dead_runners(self, *, stale_after: float | None = None) -> set[str]:
        found = await self._rows(Q.busy_runners, self.runner_id)
        now = time.time()
        dead: set[str] = set()
        for runner, beat in found:
            if runner is None:
                continue
            if not self._lock.alive(runner) or (stale_after is not None and (beat or 0.0) < now - stale_after):
                dead.add(runner)
        return dead

    async def adopt_turns(self, runners: Collection[str]) -> list[str]:
        names = sorted(runners)
        if not names:
            return []

        def op(c: sqlite3.Connection) -> list[str]:
            with write(c):
                adopted = c.execute(Q.in_(Q.adopt_where, len(names), " RETURNING id"),
                                    (self.runner_id, *names)).fetchall()
                c.execute(Q.in_(Q.delete_runners_where, len(names)), names)
                return [r[0] for r in adopted]

        ids = await self._run(op)
        for name in names:
            self._lock.forget(name)
        return ids

    async def runner_alive(self, runner_id: str) -> bool:
        return self._lock.alive(runner_id)

    # the tool-effect ledger and the audit trail --------------------------------
    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                row = c.execute(Q.turn_owner, (turn_id,)).fetchone()
                if row is None:
                    raise NotFound("turn", f"turn {turn_id} not found")
                if row[0] == "running" and row[1] != self.runner_id:  # fenced, as every write of the turn
                    raise TurnTakenOver(turn_id)
                c.executemany(Q.start_call, [(turn_id, x.tool_use_id, x.tool, x.idempotency_key, now) for x in calls])

        await self._run_grouped(op)

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                _exists(c, Q.turn_exists, turn_id, "turn")
                c.execute(Q.end_tool_call, (now, is_error, result, turn_id, tool_use_id))

        await self._run(op)

    async def record_tool_decisions(self, turn_id: str, decisions: Sequence[ToolDecision]) -> None:
        def op(c: sqlite3.Connection) -> None:
            with write(c):
                _exists(c, Q.turn_exists, turn_id, "turn")
                c.executemany(Q.record_decision, [rows.decision_row(turn_id, d) for d in decisions])

        await self._run(op)

    async def grant_tool(self, session_id: str, tool: str, granted_by: str) -> None:
        now = time.time()

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                _exists(c, Q.session_exists, session_id, "session")
                c.execute(Q.grant_tool, (session_id, tool, granted_by, now))

        await self._run(op)

    # budgets ---------------------------------------------------------------
    async def charge_step(self, turn_id: str, step: int, scopes: Sequence[str], tokens: int,
                          nano_usd: int) -> dict[str, Spend] | None:
        now = time.time()

        def op(c: sqlite3.Connection) -> dict[str, Spend] | None:
            with write(c):
                _exists(c, Q.turn_exists, turn_id, "turn")
                if c.execute(Q.charge, (turn_id, step, tokens, nano_usd)).rowcount == 0:
                    return None
                return {scope: rows.spend(c.execute(Q.add_spend, (scope, tokens, nano_usd, now)).fetchone())
                        for scope in scopes}

        return await self._run(op)

    # notebooks, blobs and queued messages ----------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        text = dumps(doc)

        def op(c: sqlite3.Connection) -> int:
            with write(c):
                _exists(c, Q.session_exists, session_id, "session")
                if base is not None:
                    stored = c.execute(Q.notebook_version, (session_id,)).fetchone()
                    if (stored[0] if stored else 0) != base:
                        raise StaleNotebook(session_id, base)
                return int(c.execute(Q.save_notebook, (session_id, text, time.time())).fetchone()[0])

        return await self._run(op)

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        record = NotebookFile(name, len(data), hashlib.sha256(data).hexdigest(), info, time.time())

        def op(c: sqlite3.Connection) -> None:
            with write(c):
                _exists(c, Q.session_exists, session_id, "session")
                others = c.execute(Q.files_total, (session_id, name)).fetchone()[0]
                check_files_total(name, len(data), int(others), max_total)
                c.execute(Q.put_file, (session_id, name, record.size, record.sha256, dumps(info), data,
                                       record.created_at))

        await self._run(op)
        return record

    async def queue_message(self, session_id: str, text: str,
                            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        now = time.time()
        refs = [a.model_dump(mode="json") for a in attachments]

        def op(c: sqlite3.Connection) -> int | None:
            with write(c):  # one writer at a time: the turn cannot end between the check and the insert
                if c.execute(Q.running_turn, (session_id,)).fetchone() is None:
                    return None
                return int(c.execute(Q.queue, (session_id, text, dumps(refs), now)).fetchone()[0])

        qid = await self._run(op)
        if qid is None:
            return None
        return QueuedMessage(qid, session_id, text, [a.model_copy() for a in attachments], now)

    async def take_queued(self, session_id: str) -> list[QueuedMessage]:
        def op(c: sqlite3.Connection) -> list[Any]:
            # Asked at every step boundary and mostly empty: a read says so without a write
            # transaction (a message queued just after it is taken at the next boundary).
            if c.execute(Q.any_queued, (session_id,)).fetchone() is None:
                return []
            with write(c):
                return c.execute(Q.take_queued, (session_id,)).fetchall()

        return rows.queued(session_id, await self._run(op))
