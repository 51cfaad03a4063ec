"""Rows of the SQL stores, both ways: the models as column values, and rows as models.

Rows are read by position, in the column order of the statement that reads them
(``statements.py``); SQLite and PostgreSQL rows (``sqlite3`` tuples, asyncpg records) read
alike. JSON columns come back as text from both, and are parsed here, once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import BaseModel

from ..blocks import BLOCK_ADAPTER, Attachment, Block, Session, TextBlock, ThinkingBlock, ToolResultBlock, Turn, Usage
from ..errors import NotFound, Refused, SeqConflictError, TurnTakenOver
from .protocol import NotebookFile, QueuedMessage, Spend, StoredEvent, ToolCallRecord, ToolDecision, ToolGrant, User

Row = Sequence[Any]
"""A row read by position: a ``sqlite3`` tuple or an asyncpg ``Record``."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


# models as column values ---------------------------------------------------------
def _default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def dumps(obj: Any) -> str:
    """JSON text for a column; pydantic models inside are dumped as they would be on the wire."""
    return orjson.dumps(obj, default=_default).decode()


def text_content(block: Block) -> str | None:
    """The searchable text of a block: text, thinking or a tool result's content."""
    if isinstance(block, TextBlock):
        text = block.text
    elif isinstance(block, ThinkingBlock):
        text = block.thinking
    elif isinstance(block, ToolResultBlock):
        text = block.content
    else:
        return None
    # PostgreSQL text cannot hold NUL; this column is a search copy, the JSON keeps the original.
    return text.replace("\x00", "") if "\x00" in text else text


def block_row(turn_id: str, block: Block) -> tuple[str, int, int, str, str | None, str]:
    """(turn_id, seq, step, block_type, text_content, content) for the blocks table."""
    content = BLOCK_ADAPTER.dump_json(block).decode()
    return turn_id, block.seq, block.step, block.type, text_content(block), content


def agents_json(agents: list[dict[str, Any]] | None) -> str | None:
    """The sessions.agents column: the agents' configuration as JSON text."""
    return None if agents is None else orjson.dumps(agents).decode()


def usage_to_json(usage: Usage, step_usage: Sequence[Usage] = ()) -> str:
    """The turn's ``usage`` column: the totals, plus each step's usage under ``per_step``."""
    doc = usage.model_dump()
    doc["per_step"] = [u.model_dump() for u in step_usage]
    return orjson.dumps(doc).decode()


def decision_row(turn_id: str, d: ToolDecision) -> tuple[Any, ...]:
    """The tool_decisions row of a decision (booleans as they are: SQLite stores 1 and 0)."""
    return turn_id, d.tool_use_id, d.tool, d.approved, d.source, d.decided_by, d.decided_at, d.reason, d.always


# rows as models ------------------------------------------------------------------
def user(row: Row) -> User:
    return User(id=row[0], name=row[1])


def session(row: Row) -> Session:
    """A session from a row of ``statements.SESSION_COLS``."""
    return Session(id=row[0], user_id=row[1], title=row[2], model=row[3], toolset=row[4],
                   created_at=row[5], agents=None if row[6] is None else orjson.loads(row[6]), current_agent=row[7],
                   current_leaf=row[8])


def turn(row: Row, blocks: list[Block]) -> Turn:
    """A turn from a row of ``statements.TURN_COLS`` and its parsed blocks."""
    raw = row[5]
    doc = orjson.loads(raw) if isinstance(raw, str | bytes) else dict(raw or {})
    per_step = [Usage.model_validate(u) for u in doc.pop("per_step", None) or []]
    return Turn(id=row[0], session_id=row[1], input=row[2], status=row[3], stop_reason=row[4],
                usage=Usage.model_validate(doc), step_usage=per_step, steps=row[6], model=row[7], error=row[8],
                created_at=row[9], parent_turn_id=row[10], blocks=blocks)


def block(content: str | bytes) -> Block:
    return BLOCK_ADAPTER.validate_json(content)


def event(turn_id: str, row: Row) -> StoredEvent:
    """A stored event from (n, name, data)."""
    return StoredEvent(turn_id=turn_id, n=row[0], name=row[1], data=orjson.loads(row[2]))


def tool_call(r: Row) -> ToolCallRecord:
    return ToolCallRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], None if r[7] is None else bool(r[7]), r[8])


def tool_decision(r: Row) -> ToolDecision:
    return ToolDecision(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6], bool(r[7]))


def tool_grant(r: Row) -> ToolGrant:
    return ToolGrant(r[0], r[1], r[2])


def spend(r: Row, at: int = 0) -> Spend:
    """A budget counter from (tokens, nano_usd, granted_tokens, granted_nano_usd) at ``at``."""
    return Spend(r[at], r[at + 1], r[at + 2], r[at + 3])


def notebook(row: Row) -> dict[str, Any]:
    """A notebook document from (doc, version)."""
    return {**orjson.loads(row[0]), "version": row[1]}


def notebook_file(r: Row) -> NotebookFile:
    return NotebookFile(r[0], int(r[1]), r[2], orjson.loads(r[3]), r[4])


def queued(session_id: str, rows: Sequence[Row]) -> list[QueuedMessage]:
    """Taken messages, oldest first, from rows of (id, text, attachments, created_at)."""
    return [QueuedMessage(int(r[0]), session_id, r[1], [Attachment.model_validate(a) for a in orjson.loads(r[2])],
                          r[3]) for r in sorted(rows, key=lambda r: int(r[0]))]


def refusal(state: Row | None, turn_id: str, seq: int | None, n: int | None, runner_id: str) -> Refused:
    """Why a guarded write to a turn touched no row, from the turn's (next_seq, last_n,
    status, runner_id), or None for no such turn."""
    if state is None:
        return NotFound("turn", f"turn {turn_id} not found")
    if state[2] == "running" and state[3] != runner_id:
        return TurnTakenOver(turn_id)
    if seq is not None and seq != state[0]:
        return SeqConflictError(f"block seq {seq} is not the next seq {state[0]} of {turn_id}")
    return SeqConflictError(f"event {n} is not above the last event {state[1]} of {turn_id}")
