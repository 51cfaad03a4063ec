"""Every statement of the two SQL stores, written once and rendered for each when this module
is imported (``SQLITE``, ``POSTGRES``): the stores only look them up.

Statements are written in PostgreSQL's form, with positional ``$n`` parameters; SQLite gets
``?n`` for ``$n`` (the same numbers, so one argument tuple serves both). The few real
differences of syntax are named on ``SQLDialect``:

* ``cast(type)``: PostgreSQL gives each ``$n`` the type of its first use, and where that use
  does not tell (``$1 IS NULL``, a value a SELECT feeds to a json column) a cast says it;
  SQLite has nothing to say.
* ``order``: the column of insertion order (PostgreSQL's identity column ``ord``, SQLite's
  ``rowid``); ``ties``: what orders the rows of the audit tables that share a time
  (``rowid`` on SQLite; nothing on PostgreSQL, whose rows there have no such column).
* ``is_``: equality that holds for two NULLs (``IS NOT DISTINCT FROM``, which SQLite only
  knows from 3.39 on; its own ``IS``).

The statements of one backend alone are in ``SQLiteStatements`` and ``PostgresStatements``:
SQLite writes a turn with several statements in one transaction (it has no data-modifying
CTEs); PostgreSQL joins them into one statement by data-modifying CTEs, takes row and advisory
locks, keeps time by the database clock, and binds lists as arrays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

SESSION_COLS = "id, user_id, title, model, toolset, created_at, agents, current_agent, current_leaf"
TURN_COLS = "id, session_id, input, status, stop_reason, usage, steps, model, error, created_at, parent_turn_id"
_PARAM = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class SQLDialect:
    name: Literal["sqlite", "postgres"]
    order: str
    ties: str
    is_: str

    def cast(self, type_: str) -> str:
        return f"::{type_}" if self.name == "postgres" else ""

    def __call__(self, sql: str) -> str:
        """``sql`` with this dialect's parameters."""
        return sql if self.name == "postgres" else _PARAM.sub(r"?\1", sql)


class Statements:
    """The statements both SQL stores run, in one store's dialect."""

    def __init__(self, d: SQLDialect) -> None:
        json = d.cast("json")
        self.d = d
        # the schema and the runners' rows
        self.migrations_done = "SELECT version FROM schema_migrations"
        self.record_migration = d("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)")
        self.delete_runner = d("DELETE FROM runners WHERE id = $1")
        # users
        self.user_named = d("SELECT 1 FROM users WHERE name = $1")
        self.insert_user = d("INSERT INTO users (id, name, key_hash, created_at) VALUES ($1, $2, $3, $4)")
        self.user_by_key = d("SELECT id, name FROM users WHERE key_hash = $1")
        # sessions
        self.insert_session = d(f"INSERT INTO sessions ({SESSION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)")
        self.session = d(f"SELECT {SESSION_COLS} FROM sessions WHERE id = $1")
        self.sessions_of = d(f"SELECT {SESSION_COLS} FROM sessions WHERE user_id = $1 ORDER BY {d.order}")
        self.session_exists = d("SELECT 1 FROM sessions WHERE id = $1")
        self.set_agent = d("UPDATE sessions SET current_agent = $1 WHERE id = $2")
        self.rename_session = d("UPDATE sessions SET title = $1 WHERE id = $2")
        self.delete_session = d("DELETE FROM sessions WHERE id = $1")
        # turns
        # A new turn follows $10 ('' for none: a first turn), or else (NULL) the session's
        # current leaf; it becomes the leaf (``set_leaf``).
        self.insert_turn = d("INSERT INTO turns (id, session_id, input, status, usage, model, client_tools,"
                             " created_at, runner_id, last_n, parent_turn_id) VALUES ($1, $2, $3, 'running',"
                             f" $4{json}, $5, $6{json}, $7, $8, $9, nullif(coalesce($10{d.cast('text')},"
                             " (SELECT current_leaf FROM sessions WHERE id = $2)), ''))")
        self.set_leaf = d("UPDATE sessions SET current_leaf = $1 WHERE id = $2")
        self.session_leaf = d("SELECT current_leaf FROM sessions WHERE id = $1")
        # the tree of turns: does session $1 exist, and is turn $2 one of its turns
        self.turn_of_session = d("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1),"
                                 " EXISTS (SELECT 1 FROM turns WHERE id = $2 AND session_id = $1)")
        self.move_leaf = d("UPDATE sessions SET current_leaf = $2 WHERE id = $1"
                           " AND EXISTS (SELECT 1 FROM turns WHERE id = $2 AND session_id = $1)")
        # The open turn a write ran into (the one-open-turn index): of session $1, or else of turn $2's.
        self.open_turn = d("SELECT id FROM turns WHERE session_id = coalesce($1, (SELECT session_id FROM turns"
                           " WHERE id = $2)) AND id <> $2 AND status IN ('running', 'awaiting_client')")
        self.turn_state = d("SELECT next_seq, last_n, status, runner_id FROM turns WHERE id = $1")
        self.turn_exists = d("SELECT 1 FROM turns WHERE id = $1")
        self.client_tools = d("SELECT client_tools FROM turns WHERE id = $1")
        self.last_n = d("SELECT last_n FROM turns WHERE id = $1")
        self.events_after = d("SELECT n, name, data FROM turn_events WHERE turn_id = $1 AND n > $2 ORDER BY n")
        self.discard_blocks = d("DELETE FROM blocks WHERE turn_id = $1 AND step = $2")
        self.renumber = d("UPDATE turns SET next_seq = (SELECT coalesce(max(seq) + 1, 0) FROM blocks"
                          " WHERE turn_id = $1) WHERE id = $1")
        # The guarded update at the heart of every write to a turn: it advances the turn's
        # counters only if the block's seq ($1, NULL for a write without a block) is the next
        # one and the lowest event number the write stores ($6) is above the last, and sets
        # what ``set`` says ($3 a status or NULL, $4 this runner). No row updated: refused. A
        # running turn takes writes from its own runner only (``TurnTakenOver`` otherwise).
        self._advance = ("UPDATE turns SET next_seq = coalesce($1, next_seq - 1) + 1, last_n = $2{set}"
                         f" WHERE id = $5 AND ($1{d.cast('integer')} IS NULL OR next_seq = $1) AND last_n < $6"
                         f" AND (status <> 'running' OR runner_id {d.is_} $4{d.cast('text')})")
        self.set_status = d("UPDATE turns SET status = $1,"
                            " runner_id = CASE WHEN $1 = 'running' THEN $2 ELSE runner_id END WHERE id = $3")
        self.claim = self.set_status + d(" AND status = $4")
        # the tool-effect ledger and the audit trail
        self.tool_calls = d("SELECT tool_use_id, tool, idempotency_key, state, attempts, started_at, ended_at,"
                            f" is_error, result FROM tool_calls WHERE turn_id = $1 ORDER BY started_at{d.ties}")
        self.tool_decisions = d("SELECT tool_use_id, tool, approved, source, decided_by, decided_at, reason, always"
                                f" FROM tool_decisions WHERE turn_id = $1 ORDER BY decided_at{d.ties}")
        self.grant_tool = d("INSERT INTO tool_grants (session_id, tool, granted_by, granted_at)"
                            " VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, tool) DO NOTHING")
        self.tool_grants = d("SELECT tool, granted_by, granted_at FROM tool_grants WHERE session_id = $1"
                             " ORDER BY tool")
        # budgets
        self.charge = d("INSERT INTO budget_charges (turn_id, step, tokens, nano_usd) VALUES ($1, $2, $3, $4)"
                        " ON CONFLICT DO NOTHING")
        self.add_spend = d(
            "INSERT INTO budget_counters (scope, tokens, nano_usd, updated_at) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (scope) DO UPDATE SET tokens = budget_counters.tokens + excluded.tokens,"
            " nano_usd = budget_counters.nano_usd + excluded.nano_usd, updated_at = excluded.updated_at"
            " RETURNING tokens, nano_usd, granted_tokens, granted_nano_usd")
        self.grant_budget = d(
            "INSERT INTO budget_counters (scope, granted_tokens, granted_nano_usd, updated_at)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (scope) DO UPDATE SET"
            " granted_tokens = budget_counters.granted_tokens + excluded.granted_tokens,"
            " granted_nano_usd = budget_counters.granted_nano_usd + excluded.granted_nano_usd,"
            " updated_at = excluded.updated_at")
        self.spend_where = ("SELECT scope, tokens, nano_usd, granted_tokens, granted_nano_usd FROM budget_counters"
                            " WHERE scope")
        # notebooks, their files, blobs and queued messages
        self.save_notebook = d(
            f"INSERT INTO notebooks (session_id, doc, version, updated_at) VALUES ($1, $2{json}, 1, $3)"
            " ON CONFLICT (session_id) DO UPDATE SET doc = excluded.doc,"
            " version = notebooks.version + 1, updated_at = excluded.updated_at RETURNING version")
        self.notebook = d("SELECT doc, version FROM notebooks WHERE session_id = $1")
        self.files_total = d("SELECT coalesce(sum(size), 0) FROM notebook_files WHERE session_id = $1"
                             " AND name <> $2")
        self.put_file = d(
            "INSERT INTO notebook_files (session_id, name, size, sha256, info, data, created_at)"
            f" VALUES ($1, $2, $3, $4, $5{json}, $6, $7) ON CONFLICT (session_id, name) DO UPDATE SET"
            " size = excluded.size, sha256 = excluded.sha256, info = excluded.info, data = excluded.data,"
            " created_at = excluded.created_at")
        self.notebook_files = d("SELECT name, size, sha256, info, created_at FROM notebook_files"
                                " WHERE session_id = $1 ORDER BY name")
        self.file_data = d("SELECT data FROM notebook_files WHERE session_id = $1 AND name = $2")
        self.delete_file = d("DELETE FROM notebook_files WHERE session_id = $1 AND name = $2")
        self.put_blob = d("INSERT INTO blobs (sha256, media_type, size, data, created_at)"
                          " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING")
        self.blobs_where = "SELECT sha256, data FROM blobs WHERE sha256"
        self.running_turn = d("SELECT 1 FROM turns WHERE session_id = $1 AND status = 'running'")
        self.queue = d("INSERT INTO queued_messages (session_id, text, attachments, created_at)"
                       f" VALUES ($1, $2, $3{json}, $4) RETURNING id")
        self.take_queued = d("DELETE FROM queued_messages WHERE session_id = $1"
                             " RETURNING id, text, attachments, created_at")
        self.adopt_where = d("UPDATE turns SET runner_id = $1 WHERE status = 'running' AND runner_id")
        self.delete_runners_where = "DELETE FROM runners WHERE id"


    def any_of(self, sql: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        """``sql``, which ends in a column, matching any of ``values``; and its arguments."""
        raise NotImplementedError


class SQLiteStatements(Statements):
    """SQLite's own: a turn's write as separate statements (one transaction holds them), and
    lists as one ``?`` each."""

    def __init__(self) -> None:
        super().__init__(SQLDialect("sqlite", order="rowid", ties=", rowid", is_="IS"))
        d = self.d
        self.turn = d(f"SELECT {TURN_COLS} FROM turns WHERE id = $1")
        self.turns_of = d(f"SELECT {TURN_COLS} FROM turns WHERE session_id = $1 ORDER BY rowid")
        self.blocks_of = d("SELECT content FROM blocks WHERE turn_id = $1 ORDER BY seq")
        self.session_blocks = d("SELECT b.turn_id, b.content FROM blocks b JOIN turns t ON t.id = b.turn_id"
                                " WHERE t.session_id = $1 ORDER BY b.turn_id, b.seq")
        # SQLite maintains the indexes on every column a SET names, and most writes (block
        # after block) keep the status: the status columns are named only when it changes.
        self.advance_counters = d(self._advance.format(set=""))
        self.advance_status = d(self._advance.format(
            set=", status = $3, runner_id = CASE WHEN $3 = 'running' THEN $4 ELSE runner_id END"))
        self.insert_block = d("INSERT INTO blocks (turn_id, seq, step, block_type, text_content, content)"
                              " VALUES ($1, $2, $3, $4, $5, $6)")
        self.insert_event = d("INSERT INTO turn_events (turn_id, n, name, data) VALUES ($1, $2, $3, $4)")
        self.end_call_of_result = d("UPDATE tool_calls SET state = 'finished', ended_at = coalesce(ended_at, $1),"
                                    " is_error = $2 WHERE turn_id = $3 AND tool_use_id = $4")
        self.outcome = d("UPDATE turns SET stop_reason = $1, usage = $2, steps = $3, error = $4 WHERE id = $5")
        self.beat = d("INSERT INTO runners (id, heartbeat_at) VALUES ($1, $2)"
                      " ON CONFLICT (id) DO UPDATE SET heartbeat_at = $2")
        self.busy_runners = d("SELECT DISTINCT t.runner_id, r.heartbeat_at FROM turns t LEFT JOIN runners r"
                              " ON r.id = t.runner_id WHERE t.status = 'running' AND t.runner_id IS NOT $1")
        self.turn_owner = d("SELECT status, runner_id FROM turns WHERE id = $1")
        self.start_call = d(
            "INSERT INTO tool_calls (turn_id, tool_use_id, tool, idempotency_key, state, started_at)"
            " VALUES ($1, $2, $3, $4, 'started', $5) ON CONFLICT (turn_id, tool_use_id) DO UPDATE SET"
            " state = 'started', attempts = attempts + 1, started_at = $5, ended_at = NULL, is_error = NULL,"
            " result = NULL")
        self.end_tool_call = d("UPDATE tool_calls SET state = 'finished', ended_at = $1, is_error = $2,"
                               " result = $3 WHERE turn_id = $4 AND tool_use_id = $5")
        # REPLACE (not an upsert): a decided-again call gets a new rowid, and so sorts last among its time.
        self.record_decision = d("INSERT OR REPLACE INTO tool_decisions (turn_id, tool_use_id, tool, approved,"
                                 " source, decided_by, decided_at, reason, always)"
                                 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
        self.notebook_version = d("SELECT version FROM notebooks WHERE session_id = $1")
        self.any_queued = d("SELECT 1 FROM queued_messages WHERE session_id = $1 LIMIT 1")

    @staticmethod
    def in_(sql: str, n: int, suffix: str = "") -> str:
        """``sql`` ending in a column, with `` IN (?, …)`` for ``n`` values after it."""
        return f"{sql} IN ({', '.join('?' * n)}){suffix}"

    def any_of(self, sql: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        return self.in_(sql, len(values)), list(values)


def _event(k: int) -> str:
    """The write's one event, after its turn row ``t``: number $2, name and data from $k."""
    return (f", e AS (INSERT INTO turn_events (turn_id, n, name, data) SELECT id, $2, ${k}, ${k + 1}::json"
            " FROM t)")


def _events(k: int) -> str:
    """The write's pending events and its own: numbers, names and data as arrays from $k."""
    return (", e AS (INSERT INTO turn_events (turn_id, n, name, data) SELECT t.id, v.n, v.name, v.data::json"
            f" FROM t, unnest(${k}::bigint[], ${k + 1}::text[], ${k + 2}::text[]) AS v (n, name, data))")


ALIVE = ("EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
         " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
         " AND l.classid = (r.lock_key >> 32)::oid AND l.objid = (r.lock_key & 4294967295)::oid)")
"""PostgreSQL: the runner ``r`` (a row of ``runners``) holds its liveness lock
(``pg.LivenessLock``). A bigint advisory lock shows in ``pg_locks`` as its high and low 32
bits (``classid``, ``objid``)."""


class PostgresStatements(Statements):
    """PostgreSQL's own: each write to a turn one statement (its guarded update, then the
    inserts that hang off its RETURNING row, so that a refused write inserts nothing), locks,
    the database clock, and lists as arrays."""

    NOW = "extract(epoch FROM clock_timestamp())::float8"

    def __init__(self) -> None:
        super().__init__(SQLDialect("postgres", order="ord", ties="", is_="IS NOT DISTINCT FROM"))
        self.migration_lock = "SELECT pg_advisory_xact_lock($1)"
        self.lock_users = "LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE"
        self.session_locked = self.session_exists + " FOR UPDATE"
        self.turn_locked = self.turn_exists + " FOR UPDATE"
        self.running_turn_held = self.running_turn + " FOR SHARE"
        # The turn, the session's leaf moved to it, and (``_with_event``) its first event, in one
        # statement; its parent comes back.
        new_turn = (f"WITH t AS ({self.insert_turn} RETURNING id, parent_turn_id),"
                    " s AS (UPDATE sessions SET current_leaf = $1 WHERE id = $2)")
        self.create_turn = new_turn + " SELECT parent_turn_id FROM t"
        self.create_turn_with_event = (new_turn + ", e AS (INSERT INTO turn_events (turn_id, n, name, data)"
                                       " SELECT id, $9, $11, $12::json FROM t) SELECT parent_turn_id FROM t")
        turns = (f"SELECT {TURN_COLS}, (SELECT json_agg(b.content ORDER BY b.seq) FROM blocks b"
                 " WHERE b.turn_id = t.id) FROM turns t")
        self.turn = turns + " WHERE t.id = $1"
        self.turns_of = turns + " WHERE t.session_id = $1 ORDER BY t.ord"
        # A write to a turn: $1–$6 as in ``_advance``, then the write's own from $7. The
        # status is always named (coalesce keeps it). finish_turn sets its outcome in the same
        # UPDATE: PostgreSQL applies only one of two updates of a row made by one statement.
        status = ", status = coalesce($3, status), runner_id = CASE WHEN $3 = 'running' THEN $4 ELSE runner_id END"
        advance = "WITH t AS (" + self._advance.format(set=status) + " RETURNING id)"
        finish = ("WITH t AS (" + self._advance.format(
            set=status + ", stop_reason = $7, usage = $8::json, steps = $9, error = $10") + " RETURNING id)")
        # $7–$10 the block; a tool result ends its call's ledger row, if it has one ($11–$13).
        block = (", b AS (INSERT INTO blocks (turn_id, seq, step, block_type, text_content, content)"
                 " SELECT id, $1, $7::integer, $8, $9, $10::json FROM t)")
        end_call = (", l AS (UPDATE tool_calls SET state = 'finished', ended_at = coalesce(tool_calls.ended_at,"
                    " $11), is_error = $12 FROM t WHERE tool_calls.turn_id = t.id AND tool_calls.tool_use_id = $13)")
        count = " SELECT count(*) FROM t"
        # Each as (with its own event only, with pending events before it).
        self.append_block = (advance + _event(11) + block + count, advance + _events(11) + block + count)
        self.append_result = (advance + _event(14) + block + end_call + count,
                              advance + _events(14) + block + end_call + count)
        self.append_event = (advance + _event(7) + count, advance + _events(7) + count)
        self.finish = (finish + _event(11) + count, finish + _events(11) + count)
        # Several of those writes, of distinct turns, in one statement (``pg_batch``): $1 the
        # runner, $2–$18 one array element per write (its guard, its outcome when it finishes
        # the turn, its block, the ledger row its tool result ends), $19–$22 the events of all
        # of them. Each turn's update is guarded as alone; the inserts hang off the turns that
        # passed. The ids of those come back.
        self.append_many = (
            "WITH w AS (SELECT * FROM unnest($2::text[], $3::integer[], $4::bigint[], $5::text[], $6::bigint[],"
            " $7::boolean[], $8::text[], $9::text[], $10::integer[], $11::text[], $12::integer[], $13::text[],"
            " $14::text[], $15::text[], $16::float8[], $17::boolean[], $18::text[]) AS w (turn_id, seq, n, status,"
            " first, fin, stop_reason, usage, steps, error, step, block_type, text_content, content, ended_at,"
            " is_error, tool_use_id)),"
            " t AS (UPDATE turns SET next_seq = coalesce(w.seq, turns.next_seq - 1) + 1, last_n = w.n,"
            " status = coalesce(w.status, turns.status),"
            " runner_id = CASE WHEN w.status = 'running' THEN $1 ELSE turns.runner_id END,"
            " stop_reason = CASE WHEN w.fin THEN w.stop_reason ELSE turns.stop_reason END,"
            " usage = CASE WHEN w.fin THEN w.usage::json ELSE turns.usage END,"
            " steps = CASE WHEN w.fin THEN w.steps ELSE turns.steps END,"
            " error = CASE WHEN w.fin THEN w.error ELSE turns.error END"
            " FROM w WHERE turns.id = w.turn_id AND (w.seq IS NULL OR turns.next_seq = w.seq)"
            " AND turns.last_n < w.first AND (turns.status <> 'running' OR turns.runner_id IS NOT DISTINCT FROM $1)"
            " RETURNING turns.id),"
            " b AS (INSERT INTO blocks (turn_id, seq, step, block_type, text_content, content)"
            " SELECT w.turn_id, w.seq, w.step, w.block_type, w.text_content, w.content::json"
            " FROM w JOIN t ON t.id = w.turn_id WHERE w.content IS NOT NULL),"
            " l AS (UPDATE tool_calls SET state = 'finished', ended_at = coalesce(tool_calls.ended_at, w.ended_at),"
            " is_error = w.is_error FROM w JOIN t ON t.id = w.turn_id WHERE w.tool_use_id IS NOT NULL"
            " AND tool_calls.turn_id = w.turn_id AND tool_calls.tool_use_id = w.tool_use_id),"
            " e AS (INSERT INTO turn_events (turn_id, n, name, data) SELECT v.turn_id, v.n, v.name, v.data::json"
            " FROM unnest($19::text[], $20::bigint[], $21::text[], $22::text[]) AS v (turn_id, n, name, data)"
            " JOIN t ON t.id = v.turn_id)"
            " SELECT coalesce(array_agg(id), '{}') FROM t")
        self.set_outcome = self.set_status.replace(
            " WHERE", ", stop_reason = $4, usage = $5::json, steps = $6, error = $7 WHERE")
        self.beat = (f"INSERT INTO runners (id, heartbeat_at, lock_key) VALUES ($1, {self.NOW}, $2)"
                     " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,"
                     " lock_key = excluded.lock_key")
        # A runner with no row (it closed its store) or no lock key holds nothing.
        self.dead_runners = (
            "SELECT DISTINCT t.runner_id FROM turns t LEFT JOIN runners r ON r.id = t.runner_id"
            " WHERE t.status = 'running' AND t.runner_id IS DISTINCT FROM $1 AND t.runner_id IS NOT NULL"
            f" AND (r.lock_key IS NULL OR NOT {ALIVE}"
            f" OR ($2::float8 IS NOT NULL AND r.heartbeat_at < {self.NOW} - $2::float8))")
        self.runner_alive = f"SELECT {ALIVE} FROM runners r WHERE r.id = $1 AND r.lock_key IS NOT NULL"
        self.adopt = self.adopt_where + " = ANY($2::text[]) RETURNING id"
        self.delete_runners = self.delete_runners_where + " = ANY($1::text[])"
        # Fenced like every write of a running turn: only its owner records that a call starts.
        self.start_calls = (
            "WITH t AS (SELECT id FROM turns WHERE id = $1 AND (status <> 'running' OR runner_id = $2)),"
            " i AS (INSERT INTO tool_calls (turn_id, tool_use_id, tool, idempotency_key, state, started_at)"
            " SELECT t.id, v.u, v.tool, v.k, 'started', $3 FROM t,"
            " unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS v (u, tool, k, i)"
            " ON CONFLICT (turn_id, tool_use_id) DO UPDATE SET"
            " state = 'started', attempts = tool_calls.attempts + 1, started_at = excluded.started_at,"
            " ended_at = NULL, is_error = NULL, result = NULL RETURNING 1)"
            " SELECT count(*) FROM t")
        self.turn_count = "SELECT count(*) FROM turns WHERE id = $1"
        self.end_tool_call = (
            "WITH t AS (SELECT id FROM turns WHERE id = $1), u AS (UPDATE tool_calls SET state = 'finished',"
            " ended_at = $3, is_error = $4, result = $5 FROM t WHERE tool_calls.turn_id = t.id"
            " AND tool_calls.tool_use_id = $2) SELECT count(*) FROM t")
        self.record_decision = (
            "INSERT INTO tool_decisions (turn_id, tool_use_id, tool, approved, source, decided_by, decided_at,"
            " reason, always) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT (turn_id, tool_use_id) DO UPDATE SET tool = excluded.tool,"
            " approved = excluded.approved, source = excluded.source, decided_by = excluded.decided_by,"
            " decided_at = excluded.decided_at, reason = excluded.reason, always = excluded.always")
        # A save on a base: the first (base 0) inserts only where none is stored, a later one
        # updates only while the stored version is still the base; no row back is a refusal.
        self.save_first_notebook = ("INSERT INTO notebooks (session_id, doc, version, updated_at)"
                                    " VALUES ($1, $2::json, 1, $3) ON CONFLICT (session_id) DO NOTHING"
                                    " RETURNING version")
        self.save_notebook_on = ("UPDATE notebooks SET doc = $2::json, version = version + 1, updated_at = $3"
                                 " WHERE session_id = $1 AND version = $4 RETURNING version")

    def any_of(self, sql: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        return sql + " = ANY($1::text[])", [list(values)]


SQLITE = SQLiteStatements()
POSTGRES = PostgresStatements()
