"""Two processes that saved one notebook at once: both changes kept (docs/guarantees.md).

A process saves its whole notebook document, on the condition that the store still holds the
version it last read or saved (its *base*). When another process saved in between, the save
is refused (``StaleNotebook``) and this module merges, cell by cell and field by field: what
this process changed since the base, laid over what the store holds now. A field both sides
changed takes this process's value (the later save); every other change of either side is
kept, so two people editing different cells, or a user editing one cell while a turn on
another server runs a second, lose nothing.

* Cells are matched by id. A cell one side added is kept. A cell one side deleted is deleted,
  unless the other side changed it meanwhile (its change is kept).
* The order is this side's when it moved cells since the base, else the store's; a cell only
  the other order holds goes before the cell it preceded there (last, when it was last).
* ``runners`` and ``seen`` (per-cell maps) merge key by key the same way; the run counter
  takes the larger of the two.

No general-purpose library merges JSON documents three ways with these domain rules (the
per-cell identity, a deleted-but-edited cell kept); the whole rule is this page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import Cell, Notebook

Doc = Mapping[str, Any]
_MISSING: Any = object()


def _pick(base: Any, ours: Any, theirs: Any) -> Any:
    """One value of three: the side that changed it since ``base`` (ours when both did)."""
    return theirs if ours == base else ours


def _merge_fields(base: Mapping[str, Any], ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in {**theirs, **ours}:
        value = _pick(base.get(key, _MISSING), ours.get(key, _MISSING), theirs.get(key, _MISSING))
        if value is not _MISSING:
            out[key] = value
    return out


def _merge_cell(base: Doc | None, ours: Doc | None, theirs: Doc | None) -> dict[str, Any] | None:
    """The merged cell, or None when it is deleted."""
    if ours is not None and theirs is not None:
        return _merge_fields(base or {}, ours, theirs)
    if ours is not None:  # theirs lacks it: they deleted it, or we added it
        return None if base is not None and dict(ours) == dict(base) else dict(ours)
    if theirs is not None:  # ours lacks it: we deleted it, or they added it
        return None if base is not None and dict(theirs) == dict(base) else dict(theirs)
    return None


def _order(base: list[str], ours: list[str], theirs: list[str], kept: set[str]) -> list[str]:
    """The merged order of the ``kept`` cell ids."""
    common = [i for i in base if i in ours and i in theirs]
    ours_common = [i for i in ours if i in common]
    skeleton, other = (ours, theirs) if ours_common != common else (theirs, ours)
    order = [i for i in skeleton if i in kept]
    for i in range(len(other) - 1, -1, -1):  # from the end, so a run of new cells keeps its order
        cell_id = other[i]
        if cell_id not in kept or cell_id in order:
            continue
        after = next((n for n in other[i + 1:] if n in order), None)
        order.insert(len(order) if after is None else order.index(after), cell_id)
    return order


def _cells(doc: Doc | None) -> tuple[list[str], dict[str, Doc]]:
    cells = list((doc or {}).get("cells") or [])
    return [str(c["id"]) for c in cells], {str(c["id"]): c for c in cells}


def _merge_map(base: Doc | None, ours: Doc | None, theirs: Doc | None) -> dict[str, Any]:
    return _merge_fields(base or {}, ours or {}, theirs or {})


def merge_docs(base: Doc | None, ours: Doc, theirs: Doc) -> dict[str, Any]:
    """``theirs`` (the store's document now) with what ``ours`` changed since ``base`` (the
    document both started from; None for a notebook that did not exist). The result has no
    ``version``: the caller saves it on top of ``theirs``'s."""
    base_order, base_cells = _cells(base)
    our_order, our_cells = _cells(ours)
    their_order, their_cells = _cells(theirs)
    merged: dict[str, dict[str, Any]] = {}
    for cell_id in {*our_cells, *their_cells}:
        cell = _merge_cell(base_cells.get(cell_id), our_cells.get(cell_id), their_cells.get(cell_id))
        if cell is not None:
            merged[cell_id] = cell
    order = _order(base_order, our_order, their_order, set(merged))
    out = {key: value for key, value in ours.items() if key not in ("cells", "runners", "seen", "version")}
    out.update(
        cells=[merged[i] for i in order],
        runners=_merge_map((base or {}).get("runners"), ours.get("runners"), theirs.get("runners")),
        seen=_merge_map((base or {}).get("seen"), ours.get("seen"), theirs.get("seen")),
        execution_count=max(int(ours.get("execution_count", 0)), int(theirs.get("execution_count", 0))),
    )
    return out


def apply_doc(nb: Notebook, doc: Doc) -> None:
    """Make ``nb`` hold ``doc``, keeping the ``Cell`` objects of cells it still has (a run of
    this process holds them), so that what a run later writes to its cell is not lost."""
    current = {c.id: c for c in nb.cells}
    cells = []
    for d in doc.get("cells") or []:
        fresh = Cell.from_dict(dict(d))
        cell = current.get(fresh.id)
        if cell is None:
            cells.append(fresh)
            continue
        for name in Cell.__slots__:
            setattr(cell, name, getattr(fresh, name))
        cells.append(cell)
    nb.cells = cells
    nb.execution_count = int(doc.get("execution_count", 0))
    nb.runners = {str(k): str(v) for k, v in (doc.get("runners") or {}).items()}
    nb.seen = {str(k): str(v) for k, v in (doc.get("seen") or {}).items()}


__all__ = ["apply_doc", "merge_docs"]
