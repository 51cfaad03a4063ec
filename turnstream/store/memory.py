"""In-memory store: the library's default, and the reference the contract suite checks.

Why one module of this size: it is the whole store protocol once, in plain Python, so that
the contract suite has one reference to hold the SQL stores to; split, its parts would share
every dict."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

import orjson

from ..blocks import Attachment, Block, Session, ToolResultBlock, Turn, TurnStatus, TurnStopReason, Usage
from ..errors import (
    AlreadyExists,
    InvalidValue,
    NotFound,
    SeqConflictError,
    StaleNotebook,
    TurnConflictError,
    TurnTakenOver,
    UserExists,
)
from .keys import hash_key, new_key
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

_OPEN: tuple[TurnStatus, ...] = ("running", "awaiting_client")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


class MemoryStore:
    def __init__(self, *, runner_id: str | None = None) -> None:
        self.runner_id = runner_id or new_id("run")
        self._users: dict[str, User] = {}
        self._keys: dict[str, str] = {}
        self._sessions: dict[str, Session] = {}
        self._turns: dict[str, Turn] = {}
        self._session_turns: dict[str, list[str]] = {}
        self._events: dict[str, list[StoredEvent]] = {}
        self._client_tools: dict[str, list[dict[str, Any]]] = {}
        self._runner: dict[str, str] = {}
        """turn id -> runner that last set it running"""
        self._notebooks: dict[str, tuple[int, dict[str, Any]]] = {}
        self._calls: dict[str, dict[str, ToolCallRecord]] = {}
        self._decisions: dict[str, dict[str, ToolDecision]] = {}
        self._grants: dict[str, dict[str, ToolGrant]] = {}
        self._spend: dict[str, Spend] = {}
        self._charged: set[tuple[str, int]] = set()
        self._files: dict[str, dict[str, tuple[NotebookFile, bytes]]] = {}
        self._blobs: dict[str, bytes] = {}
        self._queued: dict[str, list[QueuedMessage]] = {}
        self._queued_ids = 0
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def create_user(self, name: str) -> tuple[User, str]:
        if any(u.name == name for u in self._users.values()):
            raise UserExists(name)
        user = User(id=new_id("usr"), name=name)
        key = new_key()
        self._users[user.id] = user
        self._keys[hash_key(key)] = user.id
        return user, key

    async def user_by_key(self, api_key: str) -> User | None:
        uid = self._keys.get(hash_key(api_key))
        return self._users.get(uid) if uid else None

    async def create_session(
        self, user_id: str, *, title: str = "", model: str = "", toolset: str | None = None,
        session_id: str | None = None, agents: list[dict[str, Any]] | None = None,
        current_agent: str | None = None,
    ) -> Session:
        if session_id is not None and session_id in self._sessions:
            raise AlreadyExists(f"session {session_id} already exists")
        s = Session(id=session_id or new_id("ses"), user_id=user_id, title=title, model=model,
                    toolset=toolset, created_at=time.time(), agents=agents, current_agent=current_agent)
        self._sessions[s.id] = s
        self._session_turns[s.id] = []
        return s

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None:
        s = self._sessions.get(session_id)
        if s is None:
            return None
        if with_turns:
            return s.model_copy(update={"turns": await self.list_turns(session_id)})
        return s.model_copy()

    async def list_sessions(self, user_id: str) -> list[Session]:
        return [s.model_copy() for s in self._sessions.values() if s.user_id == user_id]

    async def set_current_agent(self, session_id: str, name: str) -> bool:
        s = self._sessions.get(session_id)
        if s is None:
            return False
        s.current_agent = name
        return True

    async def rename_session(self, session_id: str, title: str) -> bool:
        s = self._sessions.get(session_id)
        if s is None:
            return False
        s.title = title
        return True

    async def delete_session(self, session_id: str) -> bool:
        if self._sessions.pop(session_id, None) is None:
            return False
        self._notebooks.pop(session_id, None)
        self._files.pop(session_id, None)
        self._queued.pop(session_id, None)
        self._grants.pop(session_id, None)
        for tid in self._session_turns.pop(session_id, []):
            self._turns.pop(tid, None)
            self._events.pop(tid, None)
            self._runner.pop(tid, None)
            self._calls.pop(tid, None)
            self._decisions.pop(tid, None)
        return True

    async def create_turn(
        self, session_id: str, input: str, *, model: str, client_tools: list[dict[str, Any]] | None = None,
        first_event: Callable[[str], StoredEvent] | None = None, parent_turn_id: str | None = None,
    ) -> Turn:
        async with self._lock:
            if session_id not in self._session_turns:
                raise NotFound("session", f"session {session_id} not found")
            if parent_turn_id:
                self._check_turn_of(session_id, parent_turn_id, "parent_turn_id")
            for tid in self._session_turns[session_id]:
                if self._turns[tid].status in _OPEN:
                    raise TurnConflictError(tid)
            session = self._sessions[session_id]
            t = Turn(id=new_id("turn"), session_id=session_id, input=input, model=model,
                     created_at=time.time(),
                     parent_turn_id=session.current_leaf if parent_turn_id is None else parent_turn_id or None)
            first = first_event_of(t.id, first_event)
            session.current_leaf = t.id
            self._turns[t.id] = t
            self._session_turns[session_id].append(t.id)
            self._events[t.id] = [first] if first is not None else []
            self._client_tools[t.id] = list(client_tools or [])
            self._runner[t.id] = self.runner_id
        return t.model_copy(update={"blocks": []})

    async def set_current_leaf(self, session_id: str, turn_id: str) -> None:
        self._check_turn_of(session_id, turn_id, "turn_id")
        self._sessions[session_id].current_leaf = turn_id

    def _check_turn_of(self, session_id: str, turn_id: str, field: str) -> None:
        if session_id not in self._sessions:
            raise NotFound("session", f"session {session_id} not found")
        if turn_id not in self._session_turns[session_id]:
            raise InvalidValue(field, f"{turn_id} is not a turn of session {session_id}")

    async def get_turn(self, turn_id: str) -> Turn | None:
        t = self._turns.get(turn_id)
        return t.model_copy(update={"blocks": list(t.blocks)}) if t else None

    async def list_turns(self, session_id: str) -> list[Turn]:
        return [self._turns[t].model_copy(update={"blocks": list(self._turns[t].blocks)})
                for t in self._session_turns.get(session_id, [])]

    async def client_tools(self, turn_id: str) -> list[dict[str, Any]]:
        return list(self._client_tools.get(turn_id, []))

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        first = check_pending(turn_id, pending, event)
        assert first is not None
        t = self._turn(turn_id)
        if block.seq != len(t.blocks) or first < self._next_n(turn_id):
            raise SeqConflictError(f"block seq {block.seq} is not the next seq {len(t.blocks)} of {turn_id}")
        self._check_open(t, status)
        self._check_owner(t)
        t.blocks.append(block)
        self._events[turn_id].extend(pending)
        self._events[turn_id].append(event)
        self._set(t, status)
        if isinstance(block, ToolResultBlock):
            record = self._calls.get(turn_id, {}).get(block.tool_use_id)
            if record is not None:
                record.state, record.is_error = "finished", block.is_error
                record.ended_at = record.ended_at or time.time()

    async def discard_step(self, turn_id: str, step: int) -> None:
        t = self._turn(turn_id)
        t.blocks = [b for b in t.blocks if b.step != step]

    def _turn(self, turn_id: str) -> Turn:
        t = self._turns.get(turn_id)
        if t is None:
            raise NotFound("turn", f"turn {turn_id} not found")
        return t

    def _next_n(self, turn_id: str) -> int:
        evs = self._events.get(turn_id)
        return evs[-1].n + 1 if evs else 1

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        first = check_pending(event.turn_id, pending, event)
        assert first is not None
        t = self._turn(event.turn_id)
        if first < self._next_n(event.turn_id):
            raise SeqConflictError(f"event {first} is not above the last event of {event.turn_id}")
        self._check_open(t, status)
        self._check_owner(t)
        self._events[event.turn_id].extend(pending)
        self._events[event.turn_id].append(event)
        self._set(t, status)

    def _check_open(self, t: Turn, status: TurnStatus | None) -> None:
        """Refuse a status change that would give the session a second open turn."""
        if status in _OPEN and t.status not in _OPEN:
            for tid in self._session_turns[t.session_id]:
                if tid != t.id and self._turns[tid].status in _OPEN:
                    raise TurnConflictError(tid)

    def _check_owner(self, t: Turn) -> None:
        if t.status == "running" and self._runner.get(t.id, self.runner_id) != self.runner_id:
            raise TurnTakenOver(t.id)

    def _set(self, t: Turn, status: TurnStatus | None) -> None:
        if status is not None:
            t.status = status
            if status == "running":
                self._runner[t.id] = self.runner_id

    async def events_after(self, turn_id: str, n: int) -> list[StoredEvent]:
        return [e for e in self._events.get(turn_id, []) if e.n > n]

    async def last_event_n(self, turn_id: str) -> int:
        evs = self._events.get(turn_id)
        return evs[-1].n if evs else 0

    async def set_status(self, turn_id: str, status: TurnStatus) -> None:
        t = self._turn(turn_id)
        self._check_open(t, status)
        self._set(t, status)

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        t = self._turns.get(turn_id)
        if t is None or t.status != expected:
            return False
        self._check_open(t, new)
        self._set(t, new)
        return True

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, stop_reason: TurnStopReason | None, usage: Usage,
        steps: int, error: str | None = None, event: StoredEvent | None = None,
        step_usage: Sequence[Usage] = (), pending: Sequence[StoredEvent] = (),
    ) -> None:
        first = check_pending(turn_id, pending, event)
        t = self._turn(turn_id)
        if first is not None and first < self._next_n(turn_id):
            raise SeqConflictError(f"event {first} is not above the last event of {turn_id}")
        self._check_open(t, status)
        self._check_owner(t)
        t.stop_reason, t.usage, t.steps, t.error = stop_reason, usage, steps, error
        t.step_usage = list(step_usage)
        self._set(t, status)
        if event is not None:
            self._events[turn_id].extend(pending)
            self._events[turn_id].append(event)

    async def heartbeat(self) -> None:
        return None  # only this process can see this store: its runner is alive by definition

    async def dead_runners(self, *, stale_after: float | None = None) -> set[str]:
        # Only this process sees this store, so its runner is the only live one: any other
        # runner named on a running turn (set by ``adopt_turns`` in a test) is gone.
        return {self._runner[tid] for tid, t in self._turns.items()
                if t.status == "running" and self._runner.get(tid, self.runner_id) != self.runner_id}

    async def adopt_turns(self, runners: Collection[str]) -> list[str]:
        ids = [tid for tid, t in self._turns.items() if t.status == "running" and self._runner.get(tid) in runners]
        for tid in ids:
            self._runner[tid] = self.runner_id
        return ids

    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        self._turn(turn_id)
        ledger = self._calls.setdefault(turn_id, {})
        now = time.time()
        for c in calls:
            old = ledger.get(c.tool_use_id)
            ledger[c.tool_use_id] = ToolCallRecord(c.tool_use_id, c.tool, c.idempotency_key, "started",
                                                   old.attempts + 1 if old else 1, now)

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        self._turn(turn_id)
        record = self._calls.get(turn_id, {}).get(tool_use_id)
        if record is not None:
            record.state, record.ended_at, record.is_error, record.result = "finished", time.time(), is_error, result

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        return [replace(r) for r in self._calls.get(turn_id, {}).values()]

    async def record_tool_decisions(self, turn_id: str, decisions: Sequence[ToolDecision]) -> None:
        self._turn(turn_id)
        kept = self._decisions.setdefault(turn_id, {})
        for d in decisions:
            kept.pop(d.tool_use_id, None)  # a replaced decision moves to the end, as a new row would
            kept[d.tool_use_id] = d

    async def tool_decisions(self, turn_id: str) -> list[ToolDecision]:
        return sorted(self._decisions.get(turn_id, {}).values(), key=lambda d: d.decided_at)

    async def grant_tool(self, session_id: str, tool: str, granted_by: str) -> None:
        if session_id not in self._sessions:
            raise NotFound("session", f"session {session_id} not found")
        self._grants.setdefault(session_id, {}).setdefault(tool, ToolGrant(tool, granted_by, time.time()))

    async def tool_grants(self, session_id: str) -> list[ToolGrant]:
        return sorted(self._grants.get(session_id, {}).values(), key=lambda g: g.tool)
    async def charge_step(self, turn_id: str, step: int, scopes: Sequence[str], tokens: int,
                          nano_usd: int) -> dict[str, Spend] | None:
        self._turn(turn_id)
        if (turn_id, step) in self._charged:
            return None
        self._charged.add((turn_id, step))
        for scope in scopes:
            old = self._spend.get(scope, Spend())
            self._spend[scope] = replace(old, tokens=old.tokens + tokens, nano_usd=old.nano_usd + nano_usd)
        return {scope: self._spend[scope] for scope in scopes}

    async def budget_spend(self, scopes: Sequence[str]) -> dict[str, Spend]:
        return {scope: self._spend.get(scope, Spend()) for scope in scopes}

    async def grant_budget(self, scope: str, tokens: int, nano_usd: int) -> None:
        old = self._spend.get(scope, Spend())
        self._spend[scope] = replace(old, granted_tokens=old.granted_tokens + tokens,
                                     granted_nano_usd=old.granted_nano_usd + nano_usd)

    async def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        if session_id not in self._sessions:
            raise NotFound("session", f"session {session_id} not found")
        stored = self._notebooks.get(session_id, (0, {}))[0]
        if base is not None and base != stored:
            raise StaleNotebook(session_id, base)
        version = stored + 1
        # A JSON round trip keeps the stored copy apart from the caller's dict, as a database would.
        self._notebooks[session_id] = (version, orjson.loads(orjson.dumps(doc)))
        return version

    async def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        saved = self._notebooks.get(session_id)
        return {**orjson.loads(orjson.dumps(saved[1])), "version": saved[0]} if saved else None

    async def runner_alive(self, runner_id: str) -> bool:
        return runner_id == self.runner_id

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        if session_id not in self._sessions:
            raise NotFound("session", f"session {session_id} not found")
        files = self._files.setdefault(session_id, {})
        check_files_total(name, len(data), sum(f.size for n, (f, _) in files.items() if n != name), max_total)
        record = NotebookFile(name, len(data), hashlib.sha256(data).hexdigest(), orjson.loads(orjson.dumps(info)),
                              time.time())
        files[name] = (record, bytes(data))
        return record

    async def notebook_files(self, session_id: str) -> list[NotebookFile]:
        return [f for _, (f, _) in sorted(self._files.get(session_id, {}).items())]

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None:
        found = self._files.get(session_id, {}).get(name)
        return found[1] if found else None

    async def delete_notebook_file(self, session_id: str, name: str) -> bool:
        return self._files.get(session_id, {}).pop(name, None) is not None

    async def put_blob(self, data: bytes, media_type: str) -> str:
        sha = hashlib.sha256(data).hexdigest()
        self._blobs.setdefault(sha, bytes(data))
        return sha

    async def get_blobs(self, hashes: Collection[str]) -> dict[str, bytes]:
        return {h: self._blobs[h] for h in hashes if h in self._blobs}

    async def queue_message(self, session_id: str, text: str,
                            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        if not any(self._turns[t].status == "running" for t in self._session_turns.get(session_id, [])):
            return None
        self._queued_ids += 1
        msg = QueuedMessage(self._queued_ids, session_id, text, [a.model_copy() for a in attachments], time.time())
        self._queued.setdefault(session_id, []).append(msg)
        return replace(msg, attachments=list(msg.attachments))

    async def take_queued(self, session_id: str) -> list[QueuedMessage]:
        return self._queued.pop(session_id, [])
