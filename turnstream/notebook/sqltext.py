"""Reading the text of a SQL cell. Standard library only: the kernel child loads this file too.

Conventions of a SQL cell:

* ``{{name}}`` stands for the value of the Python variable ``name``. It becomes a ``?``
  placeholder and the value travels beside the SQL as a bound parameter, so a value can never
  change the statement. Braces inside quoted strings, quoted identifiers and comments are
  left alone.
* A leading comment ``-- name: df2`` names the cell's result: the result DataFrame is stored
  in the namespace as ``df2`` and other cells may depend on it. Without it the result is only
  shown.
* The identifiers after ``FROM`` / ``JOIN`` are the tables the cell reads (best effort); the
  dependency graph links them to the cells that define those names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

_PARAM = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_RESULT_NAME = re.compile(r"^--\s*name\s*:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.IGNORECASE)
_ITEM = r"[A-Za-z_][A-Za-z0-9_]*(?:\s+(?:as\s+)?[A-Za-z_][A-Za-z0-9_]*)?"
_TABLES = re.compile(rf"\b(?:from|join)\s+({_ITEM}(?:\s*,\s*{_ITEM})*)", re.IGNORECASE)

Segment = tuple[Literal["code", "quoted", "comment"], str]


def segments(sql: str) -> Iterator[Segment]:
    """Split SQL into code, quoted ('…' strings, "…" identifiers) and comment pieces."""
    i, n, start = 0, len(sql), 0
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:  # doubled quote escapes itself
                        end += 2
                        continue
                    break
                end += 1
            end = min(end + 1, n)
            kind: Literal["quoted", "comment"] = "quoted"
        elif sql.startswith("--", i):
            nl = sql.find("\n", i)
            end = n if nl < 0 else nl
            kind = "comment"
        elif sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            end = n if close < 0 else close + 2
            kind = "comment"
        else:
            i += 1
            continue
        if start < i:
            yield "code", sql[start:i]
        yield kind, sql[i:end]
        i = start = end
    if start < n:
        yield "code", sql[start:]


@dataclass(frozen=True, slots=True)
class PositionalSql:
    """SQL with every ``{{name}}`` replaced by ``?``; ``names`` in placeholder order."""

    sql: str
    names: tuple[str, ...]


def to_positional(sql: str) -> PositionalSql:
    """Replace ``{{name}}`` placeholders in code (not in strings or comments) by ``?``."""
    parts: list[str] = []
    names: list[str] = []
    for kind, text in segments(sql):
        if kind != "code":
            parts.append(text)
            continue

        def swap(m: re.Match[str]) -> str:
            names.append(m.group(1))
            return "?"

        parts.append(_PARAM.sub(swap, text))
    return PositionalSql("".join(parts), tuple(names))


def bind(sql: str, values: Mapping[str, object]) -> tuple[str, list[object]]:
    """The statement and its parameter list; a name missing from ``values`` raises NameError."""
    pos = to_positional(sql)
    params: list[object] = []
    for name in pos.names:
        if name not in values:
            raise NameError(f"SQL parameter {{{{{name}}}}} is not defined in the notebook")
        params.append(values[name])
    return pos.sql, params


def result_name(sql: str) -> str | None:
    """The name given by a leading ``-- name: x`` comment, if any."""
    for line in sql.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("--"):
            return None
        m = _RESULT_NAME.match(stripped)
        if m:
            return m.group(1)
    return None


def table_refs(sql: str) -> list[str]:
    """Names after FROM / JOIN, in order of appearance, without duplicates."""
    code = " ".join(text if kind == "code" else " " for kind, text in segments(sql))
    found: list[str] = []
    for m in _TABLES.finditer(code):
        for item in m.group(1).split(","):
            name = item.split()[0]
            if name not in found:
                found.append(name)
    return found


def param_names(sql: str) -> list[str]:
    """Distinct ``{{name}}`` parameters in order of appearance."""
    return list(dict.fromkeys(to_positional(sql).names))
