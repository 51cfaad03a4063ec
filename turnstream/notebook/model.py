"""The notebook document: an ordered list of cells, each with its code, status and outputs.

Outputs are a discriminated union on ``type`` (plain dicts, so they go to JSON unchanged):

* ``{"type": "stdout", "text"}`` and ``{"type": "stderr", "text"}``: what the cell printed.
* ``{"type": "text", "text"}``: ``repr`` of the last expression.
* ``{"type": "table", "html", "text", "rows", "columns"}``: a DataFrame (or Series) as a
  trimmed HTML table plus a plain-text preview; ``rows``/``columns`` give the full shape.
* ``{"type": "plotly", "figure"}``: a Plotly figure, the parsed ``fig.to_json()``.
* ``{"type": "error", "ename", "evalue", "traceback"}``: the exception that ended the run;
  ``timed_out`` or ``interrupted`` (true) when the run was stopped from outside.

The persisted document is ``{"format": 1, "execution_count": n, "cells": [cell, ...],
"runners": {cell id: runner id}, "seen": {cell id: code hash}}`` with each cell as
``Cell.to_dict()``. ``runners`` names the process (the store's ``runner_id``) running each
``running`` cell, so that a reader can tell a run in progress elsewhere from one a dead
process left behind; ``seen`` is what the assistant last read of each cell's code (a hash),
so that an edit of the assistant can say when it replaced code it never saw.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict, cast

from ..errors import UnknownCellError

Language = Literal["python", "sql"]
CellStatus = Literal["idle", "waiting", "running", "success", "error", "blocked"]
Editor = Literal["user", "assistant"]
LANGUAGES: tuple[Language, ...] = ("python", "sql")
DOC_FORMAT = 1


class StreamOutput(TypedDict):
    type: Literal["stdout", "stderr"]
    text: str


class TextOutput(TypedDict):
    type: Literal["text"]
    text: str


class TableOutput(TypedDict):
    type: Literal["table"]
    html: str
    text: str
    rows: int
    columns: int


class PlotlyOutput(TypedDict):
    type: Literal["plotly"]
    figure: dict[str, Any]


class ErrorOutput(TypedDict):
    type: Literal["error"]
    ename: str
    evalue: str
    traceback: str
    timed_out: NotRequired[bool]
    interrupted: NotRequired[bool]


Output = StreamOutput | TextOutput | TableOutput | PlotlyOutput | ErrorOutput


def error_output(ename: str, evalue: str, traceback: str = "") -> ErrorOutput:
    return {"type": "error", "ename": ename, "evalue": evalue, "traceback": traceback}


def new_cell_id() -> str:
    return uuid.uuid4().hex[:8]


def code_hash(code: str) -> str:
    """A short fingerprint of a cell's code (for ``Notebook.seen``)."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]


@dataclass(slots=True)
class Cell:
    """One cell. ``execution_count`` is the notebook-wide run counter at its last run."""

    id: str
    code: str
    language: Language = "python"
    status: CellStatus = "idle"
    outputs: list[Output] = field(default_factory=list)
    execution_count: int | None = None
    blocked_by: str | None = None
    """When ``blocked``: the upstream cell whose failure (or interrupted run) stopped this one;
    when ``waiting``: the upstream cell that runs first."""
    edited_by: Editor | None = None
    """Who last set its code (or language): ``user`` (the HTTP routes) or ``assistant`` (the tools)."""
    interrupted: bool = False
    """Its last run was stopped from outside (an interrupt, the time limit) and its code has not
    changed since: a run of a cell that depends on it stops instead of running it again."""
    previous_kernel: bool = False
    """Its status and outputs come from a kernel that is gone (restarted, timed out, crashed):
    none of its names exist in the current one until it runs again."""

    def to_dict(self, *, include_outputs: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "code": self.code,
            "language": self.language,
            "status": self.status,
            "execution_count": self.execution_count,
            "blocked_by": self.blocked_by,
            "edited_by": self.edited_by,
            "interrupted": self.interrupted,
            "previous_kernel": self.previous_kernel,
        }
        if include_outputs:
            d["outputs"] = list(self.outputs)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        language = d.get("language", "python")
        status = d.get("status", "idle")
        if language not in LANGUAGES:
            raise ValueError(f"bad cell language {language!r}")
        edited_by = d.get("edited_by")
        return cls(
            id=str(d["id"]),
            code=str(d.get("code", "")),
            language=cast(Language, language),
            status=cast(CellStatus, status),
            outputs=cast(list[Output], list(d.get("outputs") or [])),
            execution_count=d.get("execution_count"),
            blocked_by=d.get("blocked_by"),
            edited_by=edited_by if edited_by in ("user", "assistant") else None,
            interrupted=d.get("interrupted") is True,
            previous_kernel=d.get("previous_kernel") is True,
        )


@dataclass(slots=True)
class Notebook:
    """A session's notebook. ``ran_code`` and ``live`` describe the current kernel only and are
    never persisted: after a reload every cell is stale until it runs again."""

    session_id: str
    cells: list[Cell] = field(default_factory=list)
    version: int = 0
    execution_count: int = 0
    ran_code: dict[str, str] = field(default_factory=dict)
    """Code of each cell as it was at its last run in the current kernel."""
    live: set[str] = field(default_factory=set)
    """Cells whose last successful run left its names in the current kernel."""
    kernel_generation: int = -1
    runners: dict[str, str] = field(default_factory=dict)
    """Cell id -> the runner (process) running it, for ``running`` cells."""
    seen: dict[str, str] = field(default_factory=dict)
    """Cell id -> ``code_hash`` of the code the assistant last read or wrote there."""

    def index(self, cell_id: str) -> int:
        for i, cell in enumerate(self.cells):
            if cell.id == cell_id:
                return i
        known = ", ".join(c.id for c in self.cells) or "none"
        raise UnknownCellError(f"No cell with id {cell_id!r} in this notebook (cells: {known})")

    def cell(self, cell_id: str) -> Cell:
        return self.cells[self.index(cell_id)]

    def find(self, cell_id: str) -> Cell | None:
        return next((c for c in self.cells if c.id == cell_id), None)

    def to_doc(self) -> dict[str, Any]:
        return {
            "format": DOC_FORMAT,
            "version": self.version,
            "execution_count": self.execution_count,
            "cells": [c.to_dict() for c in self.cells],
            "runners": dict(self.runners),
            "seen": dict(self.seen),
        }

    @classmethod
    def from_doc(cls, session_id: str, doc: dict[str, Any]) -> Notebook:
        return cls(
            session_id=session_id,
            cells=[Cell.from_dict(c) for c in doc.get("cells", [])],
            version=int(doc.get("version", 0)),
            execution_count=int(doc.get("execution_count", 0)),
            runners={str(k): str(v) for k, v in (doc.get("runners") or {}).items()},
            seen={str(k): str(v) for k, v in (doc.get("seen") or {}).items()},
        )
