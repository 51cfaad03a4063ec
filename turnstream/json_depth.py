"""How deep JSON from outside may nest, checked before anything parses it.

A parser that recurses (Python's ``json``, which ``nbformat`` uses) overflows the stack on a
document nested a hundred thousand levels deep, and the parsers that do not (orjson, pydantic's)
stop at limits of their own that differ (1,024 and 200), while orjson refuses to write a value
nested past 255. So every JSON document turnstream reads from outside (a request body, a
WebSocket message, an imported ``.ipynb``, an MCP configuration, a model's tool arguments) is
measured first against one limit, ``MAX_DEPTH``, the same the kernel's replies are held to.

The measure does not recurse: escapes are dropped, then everything but quotes and brackets,
then what lies between quotes (a bracket inside a string does not nest); the brackets left are
counted up and down, and the deepest point is the depth. A document with fewer opening brackets
than the limit is not measured at all. 16 MiB of small arrays takes about half a second.
"""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Any

import orjson

from .errors import InvalidValue

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects in JSON from outside (a Plotly figure, a notebook or a
tool's schema needs well under twenty levels)."""

_ESCAPES = (b"\\\\", b'\\"')
"""An escaped backslash, then an escaped quote: removed in this order, no quote left is escaped."""
_DROP = bytes(b for b in range(256) if b not in b'"[]{}')
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""Opening brackets become +1 and closing ones -1, read as signed bytes."""


def depth(raw: bytes | str) -> int:
    """How deep ``raw`` (JSON text, valid or not) nests its arrays and objects."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if b"\\" in data:
        for escape in _ESCAPES:
            data = data.replace(escape, b"")
    marks = data.translate(None, _DROP)
    if b'"' in marks:  # every other piece is inside a string
        marks = b"".join(marks.split(b'"')[::2])
    return max(accumulate(array("b", marks.translate(_STEPS))), default=0)


def too_deep(raw: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether ``raw`` nests deeper than ``limit``."""
    opens = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    return opens > limit and depth(raw) > limit


def check_depth(raw: bytes | str, field: str, limit: int = MAX_DEPTH) -> None:
    """``InvalidValue`` naming ``field`` (a 422 on the server) when ``raw`` nests deeper than
    ``limit``."""
    if too_deep(raw, limit):
        raise InvalidValue(field, f"the JSON is nested deeper than {limit} levels")


def loads(raw: bytes | str, field: str, limit: int = MAX_DEPTH) -> Any:
    """``raw`` parsed, after ``check_depth``; ``InvalidValue`` naming ``field`` when it is not
    JSON either."""
    check_depth(raw, field, limit)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidValue(field, f"not valid JSON: {exc}") from None


__all__ = ["MAX_DEPTH", "check_depth", "depth", "loads", "too_deep"]
