"""Which names cells define and use, how cells link, and when a cell is stale."""

from __future__ import annotations

import pytest

from turnstream.notebook import Cell, Graph, Language, analyze, stale_cells
from turnstream.notebook.graph import python_names


def names(code: str) -> tuple[set[str], set[str]]:
    n = python_names(code)
    return set(n.defines), set(n.uses)


@pytest.mark.parametrize(
    ("code", "defines", "uses"),
    [
        ("x = 1", {"x"}, set()),
        ("y = x + 1", {"y"}, {"x"}),
        ("x = 1\ny = x", {"x", "y"}, set()),  # read after the cell binds it: not a use
        ("x += 1", {"x"}, {"x"}),  # augmented assignment reads first
        ("import pandas as pd\nimport os.path", {"pd", "os"}, set()),
        ("from math import sqrt as r, pi", {"r", "pi"}, set()),
        ("for i in items:\n    total = i", {"i", "total"}, {"items"}),
        ("with open(p) as fh:\n    data = fh.read()", {"fh", "data"}, {"p"}),
        ("def f(a, b=default):\n    return a + b + scale", {"f"}, {"default", "scale"}),
        ("g = lambda v: v * k", {"g"}, {"k"}),
        ("sq = [i * i for i in nums if i > lo]", {"sq"}, {"nums", "lo"}),
        ("d = {k: v for k, v in pairs}", {"d"}, {"pairs"}),
        ("class A(Base):\n    n = size\n    m = n", {"A"}, {"Base", "size"}),
        ("def setup():\n    global cfg\n    cfg = 1", {"setup", "cfg"}, set()),
        ("try:\n    pass\nexcept ValueError as e:\n    msg = e", {"e", "msg"}, set()),
        ("print(len(rows))", set(), {"rows"}),  # builtins are not uses
        ("if (n := count) > 1:\n    pass", {"n"}, {"count"}),
        ("def f(x: Frame) -> Out:\n    pass", {"f"}, {"Frame", "Out"}),
        ("def f():\n    return helper()\nhelper = make()", {"f", "helper"}, {"make"}),
        ("def f():\n    v = 1\n    return v + w", {"f"}, {"w"}),
        ("x = = 1", set(), set()),
    ],
)
def test_python_names(code: str, defines: set[str], uses: set[str]) -> None:
    assert names(code) == (defines, uses)


def test_sql_names_use_tables_and_params_and_define_the_result_name() -> None:
    sql = "-- name: top\nSELECT * FROM people p JOIN towns t ON p.t = t.id WHERE age > {{min_age}}"
    n = analyze("sql", sql)
    assert n.defines == {"top"}
    assert n.uses == {"people", "towns", "min_age"}
    assert analyze("sql", "SELECT 1").defines == frozenset()


def cells(*specs: tuple[str, str]) -> list[Cell]:
    def language(code: str) -> Language:
        return "sql" if code.lstrip().startswith(("--", "SELECT")) else "python"

    return [Cell(id=cid, code=code, language=language(code)) for cid, code in specs]


def test_graph_links_each_use_to_the_nearest_definer_above() -> None:
    g = Graph(cells(("a", "x = 1"), ("b", "y = x * 2"), ("c", "x = 10"), ("d", "z = x + y"),
                    ("e", "w = later"), ("f", "later = 1")))
    assert g.deps == {"a": [], "b": ["a"], "c": [], "d": ["b", "c"], "e": [], "f": []}
    assert g.upstream("d") == ["a", "b", "c"]
    assert g.downstream("a") == ["b", "d"]


def test_sql_cells_join_the_graph() -> None:
    g = Graph(cells(("a", "people = load()"),
                    ("b", "-- name: adults\nSELECT * FROM people WHERE age >= {{limit}}"),
                    ("c", "limit = 18"), ("d", "n = len(adults)")))
    # "limit" is defined below b, so only the cell above counts
    assert g.deps["b"] == ["a"]
    assert g.deps["d"] == ["b"]


def ran(cs: list[Cell], counts: dict[str, int]) -> tuple[dict[str, str], set[str]]:
    for c in cs:
        if c.id in counts:
            c.status, c.execution_count = "success", counts[c.id]
    return {c.id: c.code for c in cs if c.id in counts}, {c.id for c in cs if c.id in counts}


def test_staleness() -> None:
    cs = cells(("a", "x = 1"), ("b", "y = x + 1"), ("c", "z = y + 1"), ("u", "other = 5"))
    g = Graph(cs)
    assert stale_cells(cs, g, {}, set()) == {"a", "b", "c", "u"}  # never ran

    ran_code, live = ran(cs, {"a": 1, "b": 2, "c": 3, "u": 4})
    assert stale_cells(cs, g, ran_code, live) == set()

    cs[0].code = "x = 2"  # code changed: it and everything downstream
    assert stale_cells(cs, g, ran_code, live) == {"a", "b", "c"}

    cs[0].code = "x = 1"
    cs[0].execution_count = 5  # upstream re-ran after b and c
    assert stale_cells(cs, g, ran_code, live) == {"b", "c"}

    cs[0].execution_count = 1
    cs[1].status = "error"
    assert stale_cells(cs, g, ran_code, live) == {"b", "c"}

    cs[1].status = "success"
    assert stale_cells(cs, g, ran_code, live - {"a"}) == {"a", "b", "c"}  # a new kernel lost a's names
