"""The operations both SQL stores run the same way: one statement each, a read or a write
that commits on its own.

A store provides its statements (``_q``, from ``statements.py``) and four primitives:
``_row`` and ``_rows`` run a read, ``_change`` a write of one statement (the number of rows
it changed), ``_insert`` an insert (False when the row's key is taken). What needs a
transaction, a lock or a statement of one backend's own is the store's (``sqlite.py``,
``postgres.py``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

import orjson

from ..blocks import Session, Turn
from ..errors import AlreadyExists, InvalidValue, NotFound
from . import rows
from .keys import hash_key
from .protocol import NotebookFile, Spend, StoredEvent, ToolCallRecord, ToolDecision, ToolGrant, User
from .rows import Row
from .statements import Statements


class SQLStore:
    runner_id: str
    _q: ClassVar[Statements]

    async def _row(self, sql: str, *args: Any) -> Row | None:
        """The first row of a read, or None."""
        raise NotImplementedError

    async def _rows(self, sql: str, *args: Any) -> list[Row]:
        """Every row of a read."""
        raise NotImplementedError

    async def _change(self, sql: str, *args: Any) -> int:
        """Run a write of one statement; the number of rows it changed."""
        raise NotImplementedError

    async def _insert(self, sql: str, *args: Any) -> bool:
        """Run an insert; False when it would repeat a row's key (nothing is stored then)."""
        raise NotImplementedError

    async def user_by_key(self, api_key: str) -> User | None:
        row = await self._row(self._q.user_by_key, hash_key(api_key))
        return rows.user(row) if row else None

    # sessions --------------------------------------------------------------
    async def create_session(
        self, user_id: str, *, title: str = "", model: str = "", toolset: str | None = None,
        session_id: str | None = None, agents: list[dict[str, Any]] | None = None,
        current_agent: str | None = None,
    ) -> Session:
        s = Session(id=session_id or rows.new_id("ses"), user_id=user_id, title=title, model=model,
                    toolset=toolset, created_at=time.time(), agents=agents, current_agent=current_agent)
        if not await self._insert(self._q.insert_session, s.id, s.user_id, s.title, s.model, s.toolset,
                                  s.created_at, rows.agents_json(agents), current_agent):
            raise AlreadyExists(f"session {s.id} already exists")
        return s

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None:
        row = await self._row(self._q.session, session_id)
        if row is None:
            return None
        s = rows.session(row)
        if with_turns:
            s.turns = await self.list_turns(session_id)
        return s

    async def list_sessions(self, user_id: str) -> list[Session]:
        return [rows.session(r) for r in await self._rows(self._q.sessions_of, user_id)]

    async def set_current_agent(self, session_id: str, name: str) -> bool:
        return await self._change(self._q.set_agent, name, session_id) == 1

    async def rename_session(self, session_id: str, title: str) -> bool:
        return await self._change(self._q.rename_session, title, session_id) == 1

    async def delete_session(self, session_id: str) -> bool:
        return await self._change(self._q.delete_session, session_id) == 1

    async def set_current_leaf(self, session_id: str, turn_id: str) -> None:
        if await self._change(self._q.move_leaf, session_id, turn_id) == 0:
            await self._check_turn_of(session_id, turn_id, "turn_id")

    async def _check_turn_of(self, session_id: str, turn_id: str, field: str) -> None:
        """``NotFound`` for no such session, ``InvalidValue(field)`` when ``turn_id`` is not
        one of its turns."""
        found = await self._row(self._q.turn_of_session, session_id, turn_id)
        check_turn_of(session_id, turn_id, field, found)

    # turns -----------------------------------------------------------------
    async def list_turns(self, session_id: str) -> list[Turn]:
        raise NotImplementedError

    async def client_tools(self, turn_id: str) -> list[dict[str, Any]]:
        row = await self._row(self._q.client_tools, turn_id)
        return list(orjson.loads(row[0])) if row else []

    async def events_after(self, turn_id: str, n: int) -> list[StoredEvent]:
        return [rows.event(turn_id, r) for r in await self._rows(self._q.events_after, turn_id, n)]

    async def last_event_n(self, turn_id: str) -> int:
        row = await self._row(self._q.last_n, turn_id)
        return int(row[0]) if row else 0

    # the tool-effect ledger and the audit trail --------------------------------
    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        return [rows.tool_call(r) for r in await self._rows(self._q.tool_calls, turn_id)]

    async def tool_decisions(self, turn_id: str) -> list[ToolDecision]:
        return [rows.tool_decision(r) for r in await self._rows(self._q.tool_decisions, turn_id)]

    async def tool_grants(self, session_id: str) -> list[ToolGrant]:
        return [rows.tool_grant(r) for r in await self._rows(self._q.tool_grants, session_id)]

    # budgets ---------------------------------------------------------------
    async def budget_spend(self, scopes: Sequence[str]) -> dict[str, Spend]:
        sql, args = self._q.any_of(self._q.spend_where, scopes)
        found = {r[0]: rows.spend(r, 1) for r in await self._rows(sql, *args)}
        return {scope: found.get(scope, Spend()) for scope in scopes}

    async def grant_budget(self, scope: str, tokens: int, nano_usd: int) -> None:
        await self._change(self._q.grant_budget, scope, tokens, nano_usd, time.time())

    # notebooks and blobs -----------------------------------------------------
    async def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        row = await self._row(self._q.notebook, session_id)
        return rows.notebook(row) if row else None

    async def notebook_files(self, session_id: str) -> list[NotebookFile]:
        return [rows.notebook_file(r) for r in await self._rows(self._q.notebook_files, session_id)]

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None:
        row = await self._row(self._q.file_data, session_id, name)
        return bytes(row[0]) if row else None

    async def delete_notebook_file(self, session_id: str, name: str) -> bool:
        return await self._change(self._q.delete_file, session_id, name) == 1

    async def get_blobs(self, hashes: Collection[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        sql, args = self._q.any_of(self._q.blobs_where, wanted)
        return {r[0]: bytes(r[1]) for r in await self._rows(sql, *args)}

    async def put_blob(self, data: bytes, media_type: str) -> str:
        sha = hashlib.sha256(data).hexdigest()
        await self._change(self._q.put_blob, sha, media_type, len(data), data, time.time())
        return sha


def check_turn_of(session_id: str, turn_id: str, field: str, found: Row | None) -> None:
    """Explain ``statements.turn_of_session``'s answer: ``NotFound`` for no such session,
    ``InvalidValue(field)`` when the turn is not one of its turns."""
    if found is None or not found[0]:
        raise NotFound("session", f"session {session_id} not found")
    if not found[1]:
        raise InvalidValue(field, f"{turn_id} is not a turn of session {session_id}")
