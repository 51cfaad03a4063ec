"""The server's check of every line a kernel sends it (the parent side of ``child.py``'s protocol).

The child runs cell code, and a cell can write to the child's protocol pipe itself (its file
descriptor is listed in ``/proc/self/fd``): JSON nested past any recursion limit, a list, a
number too large for the store, a reply with another request's id, outputs of a shape that the
page, the tool results and the store do not expect. So nothing the child sends is used until it
has passed here. A line that does not is a ``KernelProtocolError``: the kernel is taken to be broken,
killed, and the request ends as an error (a run as an error output on its cell).

A reply passes when it is a JSON object with the id of the request it answers, a ``status`` of
``success`` or ``error`` and ``outputs``, a list of outputs of the shapes in ``model``, and
optionally ``half_imported``, a module name. What
passes is rebuilt from the known fields only (the flags ``timed_out`` and ``interrupted`` are the
server's to set, never the child's), and made storable: a lone surrogate (a cell may print one)
becomes its ``\\udXXX`` escape, and an integer beyond 64 bits in a figure becomes a float.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar

from ..errors import KernelProtocolError
from .model import Output

MAX_DEPTH = 64
"""Deepest nesting of a line (a Plotly figure needs about ten levels)."""
_INT_RANGE = (-(2**63), 2**64 - 1)
_NUMBERS = {int, float}
_SCALARS: set[type] = {float, bool, type(None)}
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reply:
    status: Literal["success", "error"]
    outputs: list[Output]
    half_imported: str | None = None
    """The module an interrupt stopped halfway through its import (the kernel must restart)."""


def decode_ready(line: bytes) -> None:
    """Check the child's first line, ``{"op": "ready", ...}``."""
    doc = _load(line)
    if not isinstance(doc, dict) or doc.get("op") != "ready":
        _refuse(f"the kernel's first line was not ready but {_glimpse(line)}")


def decode_reply(line: bytes, request_id: int) -> Reply:
    """The reply to request ``request_id``, checked and cleaned (see above)."""
    doc = _load(line)
    if not isinstance(doc, dict):
        _refuse(f"a reply must be a JSON object, not {type(doc).__name__}")
    if doc.get("id") != request_id or isinstance(doc.get("id"), bool):
        _refuse(f"the reply answers request {_glimpse(doc.get('id'))}, not {request_id}")
    status = doc.get("status")
    if status != "success" and status != "error":
        _refuse(f"a reply's status must be success or error, not {_glimpse(status)}")
    raw = doc.get("outputs")
    if not isinstance(raw, list):
        _refuse("a reply's outputs must be a list")
    half = doc.get("half_imported")
    if half is not None and not isinstance(half, str):
        _refuse(f"a reply's half_imported must be a module name, not {_glimpse(half)}")
    return Reply(status, [_output(o) for o in raw], half[:200] if half else None)


def _load(line: bytes) -> Any:
    try:
        doc = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        _refuse("the line is nested too deeply to read")
    except ValueError as exc:  # not JSON, not UTF-8, NaN or Infinity, an integer of thousands of digits
        _refuse(f"the line is not JSON the server takes: {exc}")
    return _clean(doc, 0)


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is too large a number")
    return value


def _clean(value: Any, depth: int) -> Any:
    """``value`` with storable strings and integers, or a KernelProtocolError past ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        _refuse(f"the line is nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if kind is str:
        return _text(value)
    if kind is int:
        return _number(value)
    if kind is dict:
        return {_text(k): _clean(v, depth + 1) for k, v in value.items()}
    if kind is list:
        return value if _plain(value) else [_clean(v, depth + 1) for v in value]
    return value  # a float (finite: see _finite), a bool or None


def _plain(items: list[Any]) -> bool:
    """True when ``items`` needs no cleaning: a figure's long arrays of numbers or of labels
    are checked at C speed instead of one element at a time."""
    kinds = set(map(type, items))
    if kinds <= _SCALARS:
        return True
    if kinds <= _NUMBERS:
        return bool(_INT_RANGE[0] <= min(items) and max(items) <= _INT_RANGE[1])
    if kinds == {str}:
        try:
            "".join(items).encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return False


def _number(value: int) -> int | float:
    if _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        return value
    try:
        return float(value)
    except OverflowError:
        _refuse("a number in the line is too large")


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no store and no encoder takes it
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _output(raw: Any) -> Output:
    if not isinstance(raw, dict):
        _refuse("an output must be a JSON object")
    kind = raw.get("type")
    if kind == "stdout" or kind == "stderr":
        return {"type": kind, "text": _field(raw, "text", str)}
    if kind == "text":
        return {"type": "text", "text": _field(raw, "text", str)}
    if kind == "table":
        return {"type": "table", "html": _field(raw, "html", str), "text": _field(raw, "text", str),
                "rows": _field(raw, "rows", int), "columns": _field(raw, "columns", int)}
    if kind == "plotly":
        return {"type": "plotly", "figure": _field(raw, "figure", dict)}
    if kind == "error":
        return {"type": "error", "ename": _field(raw, "ename", str), "evalue": _field(raw, "evalue", str),
                "traceback": _field(raw, "traceback", str)}
    _refuse(f"unknown output type {_glimpse(kind)}")


def _field(raw: dict[str, Any], name: str, kind: type[T]) -> T:
    value = raw.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        _refuse(f"an output's {name} must be {kind.__name__}, not {_glimpse(value)}")
    return value


def _glimpse(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refuse(why: str) -> NoReturn:
    raise KernelProtocolError(why)


__all__ = ["MAX_DEPTH", "Reply", "decode_ready", "decode_reply"]
