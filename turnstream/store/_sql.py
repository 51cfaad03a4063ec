"""What the SQL backends share: row encoding of blocks and events, and the migration files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import orjson
from pydantic import BaseModel

from ..blocks import BLOCK_ADAPTER, Block, Session, TextBlock, ThinkingBlock, ToolResultBlock, Turn, Usage
from ..errors import StoreError
from .protocol import StoredEvent

Dialect = Literal["sqlite", "postgres"]


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


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+?)(?:\.(sqlite|postgres))?\.sql$")


def migrations(dialect: Dialect) -> list[Migration]:
    """The numbered migrations for one dialect, in order.

    ``NNNN_name.sql`` serves both dialects; ``NNNN_name.<dialect>.sql`` is one dialect's
    variant and wins over a shared file of the same number. Numbers may have gaps (each line
    of work gets its own number before the others have landed): a database applies every
    migration it has not had yet, in rising order, so those that fill a gap later are
    applied after higher ones, and must not depend on them.
    """
    chosen: dict[int, tuple[bool, Migration]] = {}
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        m = _FILE.match(entry.name)
        if m is None or (m[3] is not None and m[3] != dialect):
            continue
        version, specific = int(m[1]), m[3] is not None
        if version in chosen and chosen[version][0] and not specific:
            continue
        if version in chosen and chosen[version][0] == specific:
            raise StoreError(f"two migrations numbered {version:04d} for {dialect}")
        chosen[version] = (specific, Migration(version, m[2], entry.read_text(encoding="utf-8")))
    found = [mig for _, mig in sorted(chosen.values(), key=lambda c: c[1].version)]
    if not found or found[0].version != 1:
        raise StoreError(f"migrations for {dialect} do not begin with 0001: {[mig.version for mig in found]}")
    return found


SCHEMA_MIGRATIONS = """
-- schema_migrations: which numbered migrations this database has had, so that open()
-- applies each exactly once, in order, and a newer schema is never migrated twice.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  double precision NOT NULL
)
"""


# Column lists shared by both dialects, so that the row helpers below read rows of either.
SESSION_COLS = "id, user_id, title, model, toolset, created_at, agents, current_agent"
TURN_COLS = "id, session_id, input, status, stop_reason, usage, steps, model, error, created_at"
OPEN_STATUSES = ("running", "awaiting_client")


def session_from_row(row: Sequence[Any]) -> Session:
    return Session(id=row[0], user_id=row[1], title=row[2], model=row[3], toolset=row[4],
                   created_at=row[5], agents=None if row[6] is None else orjson.loads(row[6]), current_agent=row[7])


def agents_json(agents: list[dict[str, Any]] | None) -> str | None:
    """The sessions.agents column: the agents' configuration as JSON text."""
    return None if agents is None else orjson.dumps(agents).decode()


def usage_to_json(usage: Usage, step_usage: Sequence[Usage] = ()) -> str:
    """The turn's ``usage`` column: the totals, plus each step's usage under ``per_step``."""
    doc = usage.model_dump()
    doc["per_step"] = [u.model_dump() for u in step_usage]
    return orjson.dumps(doc).decode()


def turn_from_row(row: Sequence[Any], blocks: list[Block]) -> Turn:
    """A turn from a row of TURN_COLS (JSON columns as str or bytes) and its parsed blocks."""
    raw = row[5]
    doc = orjson.loads(raw) if isinstance(raw, str | bytes) else dict(raw or {})
    per_step = [Usage.model_validate(u) for u in doc.pop("per_step", None) or []]
    return Turn(id=row[0], session_id=row[1], input=row[2], status=row[3], stop_reason=row[4],
                usage=Usage.model_validate(doc), step_usage=per_step, steps=row[6], model=row[7], error=row[8],
                created_at=row[9], blocks=blocks)


def block_row(turn_id: str, block: Block) -> tuple[str, int, int, str, str | None, str]:
    """(turn_id, seq, step, block_type, text_content, content) for the blocks table."""
    content = BLOCK_ADAPTER.dump_json(block).decode()
    return turn_id, block.seq, block.step, block.type, text_content(block), content


def parse_block(content: str | bytes) -> Block:
    return BLOCK_ADAPTER.validate_json(content)


def event_from_row(turn_id: str, row: Sequence[Any]) -> StoredEvent:
    """A stored event from (n, name, data)."""
    return StoredEvent(turn_id=turn_id, n=row[0], name=row[1], data=orjson.loads(row[2]))
