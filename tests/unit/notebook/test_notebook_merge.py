"""Merging two saves of one notebook (``notebook.merge``): what either side changed since the
base is kept; a field both changed takes ours (the later save)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from turnstream.notebook.merge import apply_doc, merge_docs
from turnstream.notebook.model import Cell, Notebook


def cell(cell_id: str, code: str = "", **kw: Any) -> dict[str, Any]:
    return Cell(cell_id, code, **kw).to_dict()


def doc(*cells: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"format": 1, "execution_count": kw.pop("execution_count", 0), "cells": list(cells),
            "runners": kw.pop("runners", {}), "seen": kw.pop("seen", {}), **kw}


def codes(d: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["id"], c["code"]) for c in d["cells"]]


BASE = doc(cell("a", "x = 1"), cell("b", "y = 2"), cell("c", "z = 3"))


def test_edits_of_different_cells_are_both_kept() -> None:
    ours = doc(cell("a", "x = 10"), cell("b", "y = 2"), cell("c", "z = 3"))
    theirs = doc(cell("a", "x = 1"), cell("b", "y = 20"), cell("c", "z = 3"))
    assert codes(merge_docs(BASE, ours, theirs)) == [("a", "x = 10"), ("b", "y = 20"), ("c", "z = 3")]


def test_fields_merge_one_by_one_and_ours_wins_a_field_both_changed() -> None:
    ours = doc(cell("a", "x = 1", status="running"), cell("b", "ours"), cell("c", "z = 3"))
    theirs = doc(cell("a", "x = 99"), cell("b", "theirs"), cell("c", "z = 3"))
    merged = {c["id"]: c for c in merge_docs(BASE, ours, theirs)["cells"]}
    assert (merged["a"]["code"], merged["a"]["status"]) == ("x = 99", "running")
    assert merged["b"]["code"] == "ours"


def test_added_cells_keep_their_place_and_deleted_ones_go() -> None:
    ours = doc(cell("a", "x = 1"), cell("n1", "new ours"), cell("b", "y = 2"), cell("c", "z = 3"))
    theirs = doc(cell("a", "x = 1"), cell("c", "z = 3"), cell("n2", "new theirs"))  # b deleted
    assert [c["id"] for c in merge_docs(BASE, ours, theirs)["cells"]] == ["a", "n1", "c", "n2"]


def test_a_cell_deleted_on_one_side_and_changed_on_the_other_is_kept_changed() -> None:
    ours = doc(cell("a", "x = 1"), cell("c", "z = 3"))  # b deleted here
    theirs = doc(cell("a", "x = 1"), cell("b", "y = 2 edited"), cell("c", "z = 3"))
    assert codes(merge_docs(BASE, ours, theirs)) == [("a", "x = 1"), ("b", "y = 2 edited"), ("c", "z = 3")]


def test_our_moves_give_the_order_when_we_moved_cells() -> None:
    ours = doc(cell("c", "z = 3"), cell("a", "x = 1"), cell("b", "y = 2"))
    theirs = doc(cell("a", "x = 1"), cell("b", "y = 2"), cell("c", "z = 3"), cell("d", "w = 4"))
    assert [c["id"] for c in merge_docs(BASE, ours, theirs)["cells"]] == ["c", "a", "b", "d"]


def test_runners_seen_and_the_run_counter_merge_too() -> None:
    base = doc(cell("a"), runners={"a": "r1"}, seen={"a": "h1"}, execution_count=3)
    ours = doc(cell("a"), runners={}, seen={"a": "h1", "b": "h2"}, execution_count=5)  # a's run ended here
    theirs = doc(cell("a"), runners={"a": "r1", "c": "r2"}, seen={"a": "h9"}, execution_count=4)
    merged = merge_docs(base, ours, theirs)
    assert merged["runners"] == {"c": "r2"}
    assert merged["seen"] == {"a": "h9", "b": "h2"}
    assert merged["execution_count"] == 5


def test_a_notebook_both_sides_created_from_nothing() -> None:
    merged = merge_docs(None, doc(cell("a", "ours")), doc(cell("b", "theirs")))
    assert sorted(codes(merged)) == [("a", "ours"), ("b", "theirs")]


def test_applying_keeps_the_cell_objects_a_run_holds() -> None:
    nb = Notebook.from_doc("s", BASE)
    held = nb.cells[1]
    apply_doc(nb, doc(cell("a", "x = 1"), cell("b", "y = 20", status="success"), cell("n", "new")))
    assert nb.cells[1] is held and (held.code, held.status) == ("y = 20", "success")
    assert [c.id for c in nb.cells] == ["a", "b", "n"]


# -- properties ----------------------------------------------------------------------------

codes_st = st.text(alphabet="xyz =+1234", max_size=8)


@st.composite
def three_ways(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], set[str], set[str]]:
    """A base, and two sides that each edit a disjoint set of its cells and may add their own."""
    ids = [f"c{i}" for i in range(draw(st.integers(0, 6)))]
    base_cells = {i: cell(i, draw(codes_st)) for i in ids}
    mine = {i for i in ids if draw(st.booleans())}
    yours = {i for i in ids if i not in mine and draw(st.booleans())}

    def side(edits: set[str], prefix: str) -> dict[str, Any]:
        cells = [cell(i, f"{prefix}:{i}") if i in edits else dict(base_cells[i]) for i in ids]
        cells += [cell(f"{prefix}{n}", f"{prefix} added {n}") for n in range(draw(st.integers(0, 2)))]
        return doc(*cells)

    return doc(*base_cells.values()), side(mine, "o"), side(yours, "t"), mine, yours


@given(three_ways())
def test_every_change_of_either_side_survives(case: tuple[Any, ...]) -> None:
    base, ours, theirs, mine, yours = case
    merged = dict(codes(merge_docs(base, ours, theirs)))
    for i in mine:
        assert merged[i] == f"o:{i}"
    for i in yours:
        assert merged[i] == f"t:{i}"
    added = {c["id"] for d in (ours, theirs) for c in d["cells"]} - {c["id"] for c in base["cells"]}
    assert added <= merged.keys()
    assert len(merged) == len(merge_docs(base, ours, theirs)["cells"])  # each cell once


@given(three_ways())
def test_a_side_that_changed_nothing_takes_the_other(case: tuple[Any, ...]) -> None:
    base, ours, theirs, _, _ = case
    assert codes(merge_docs(base, base, theirs)) == codes(theirs)
    assert codes(merge_docs(base, ours, base)) == codes(ours)
