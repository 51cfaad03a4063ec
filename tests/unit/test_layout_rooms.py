"""The rooms' walls (issue 29), checked on the source alone, without importing it.

* **Size.** No module of ``turnstream/`` is over ``MAX_MODULE_LINES`` lines (past 400 it must
  also say why it is one decision: ``test_layout.py``), and ``loop.py``, the turn's conductor,
  stays under ``MAX_LOOP_LINES``: a phase of the turn lives in a module of its own.
* **No import circle of any kind.** An import is an arrow from the importing module to each
  module of the package it names, wherever it is written: at the top, under
  ``if TYPE_CHECKING:`` (a reader still sees the loop, and the types' owner is unclear) or
  inside a function (the same loop, only later). ``from a.b import c`` points at ``a.b`` and,
  when ``c`` is a module, at ``a.b.c`` too; ``from . import c`` points at ``c`` only when it is
  a module, else at the package. Every strongly connected set of two or more modules is a
  circle, a package and its own submodules included. Imports made by name at run time
  (``importlib.import_module``) are not seen.
* **Event names only from ``events.py``.** An event's type on the wire is its class's
  ``name`` (``TurnComplete.name``, ``EVENT_TYPES``); elsewhere in ``turnstream/`` no string
  constant spells one. Most event names mean nothing else in the package, so any string
  constant equal to one of those counts, wherever it is (a comparison, a ``match`` case, a
  dict key or value, a call's argument, an assignment), and so does one that holds it in
  double quotes (JSON written by hand, ``'{"type":"reconnect"}'``). Two names are also
  other vocabulary, ``usage`` (a payload's and the providers' usage field) and ``error`` (a
  status, a notebook output's type, a wire event of the providers): those count only where
  they stand for an event's name: compared with (``==``, ``!=``, ``in``, ``not in``) or matched
  against (``match``) an expression that ends in ``.name`` or is a variable called ``name``,
  the first argument of ``decode``, or a key of ``EVENT_TYPES``. Block types (``text``,
  ``tool_use``, …) are no event names, so they need no care. Docstrings (any string that is a
  statement of its own) and prose that mentions a name without quotes are not counted. The
  browser's JavaScript (``server/static/*.js``) cannot import ``events.py`` and is not checked.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from turnstream.events import EVENT_TYPES

PACKAGE = Path(__file__).resolve().parents[2] / "turnstream"
MAX_MODULE_LINES = 500
MAX_LOOP_LINES = 400
SHARED_WORDS = frozenset({"usage", "error"})
"""Event names that are also other vocabulary: counted only where they name an event."""


def _sources() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


# -- size ------------------------------------------------------------------------------------

def test_no_module_is_over_500_lines() -> None:
    assert {_rel(p): _lines(p) for p in _sources().values() if _lines(p) > MAX_MODULE_LINES} == {}


def test_the_loop_is_under_400_lines() -> None:
    assert _lines(PACKAGE / "loop.py") < MAX_LOOP_LINES


# -- import circles --------------------------------------------------------------------------

def imports(name: str, source: str, modules: set[str], *, package: bool = False) -> set[str]:
    """The package's modules that ``name`` (whose text is ``source``; ``package``: an
    ``__init__.py``) imports anywhere (module level, ``if TYPE_CHECKING:``, functions): the
    arrows of the module graph."""
    here = name if package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if node.module:
                out.add(mod)
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                out.add(sub if sub in modules else mod)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in modules and m != name}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def module_graph() -> dict[str, set[str]]:
    sources = _sources()
    return {name: imports(name, path.read_text(), set(sources), package=path.name == "__init__.py")
            for name, path in sources.items()}


def test_the_circle_finder_sees_every_kind_of_import() -> None:
    """A circle closed under ``if TYPE_CHECKING:`` or inside a function is still found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .pool import Pool\n"
              "def f():\n    from ..errors import Oops\n    import turnstream.events\n"
              "from .. import tools\nfrom ..tools import tool\n")
    modules = {"turnstream", "turnstream.notebook.pool", "turnstream.errors", "turnstream.events",
               "turnstream.tools", "turnstream.tools.tool", "turnstream.notebook.kernel"}
    assert imports("turnstream.notebook.kernel", source, modules) == {
        "turnstream.notebook.pool", "turnstream.errors", "turnstream.events", "turnstream.tools",
        "turnstream.tools.tool"}


def test_no_import_circle_of_any_kind() -> None:
    graph = module_graph()
    found = {" <-> ".join(c): sorted(f"{a} -> {b}" for a in c for b in graph[a] if b in c) for c in circles(graph)}
    assert found == {}


# -- event names -----------------------------------------------------------------------------

def _names_an_event(node: ast.expr) -> bool:
    """Whether ``node`` is an event's name: ``<anything>.name`` or a variable ``name``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "name"
    return isinstance(node, ast.Name) and node.id == "name"


def _event_positions(tree: ast.AST) -> Iterator[ast.Constant]:
    """The string constants that stand where an event's name goes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_an_event(s) for s in sides):
                for side in sides:
                    if isinstance(side, ast.Constant):
                        yield side
                    elif isinstance(side, ast.Tuple | ast.List | ast.Set):
                        yield from (e for e in side.elts if isinstance(e, ast.Constant))
        elif isinstance(node, ast.Match) and _names_an_event(node.subject):
            for case in node.cases:
                yield from (n.value for n in ast.walk(case.pattern)
                            if isinstance(n, ast.MatchValue) and isinstance(n.value, ast.Constant))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and ((isinstance(node.func, ast.Name) and node.func.id == "decode")
                   or (isinstance(node.func, ast.Attribute) and node.func.attr == "decode"))):
            yield node.args[0]
        elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name | ast.Attribute)
              and ast.unparse(node.value).endswith("EVENT_TYPES") and isinstance(node.slice, ast.Constant)):
            yield node.slice
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and ast.unparse(node.func.value).endswith("EVENT_TYPES")
              and node.args and isinstance(node.args[0], ast.Constant)):
            yield node.args[0]


def event_literals(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each event name spelled as a string in ``source`` (the rule of the
    module's docstring)."""
    tree = ast.parse(source)
    statements = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    only_events = set(EVENT_TYPES) - SHARED_WORDS
    found: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in statements:
            continue
        if node.value in only_events:
            found.add((node.lineno, node.value))
        found.update((node.lineno, name) for name in only_events if f'"{name}"' in node.value)
    for node in _event_positions(tree):
        if isinstance(node.value, str) and node.value in SHARED_WORDS:
            found.add((node.lineno, node.value))
    return sorted(found)


def test_the_event_name_rule_finds_what_it_says() -> None:
    source = '''
"""A docstring may say "turn_complete"."""
def f(ev, env, item, t, status, out):
    """So may a function's, turn_complete."""
    if ev.name == "turn_complete" or env.name in ("block_delta", "error"):
        pass
    match item.name:
        case "usage":
            pass
        case "text":
            pass
    send('{"type":"reconnect"}')
    decode("error", {})
    if t == "error" or status == "error" or out.get("usage"):
        pass
    return {"usage": 1, "error": 2, "text": "until turn_complete"}
'''
    assert event_literals(source) == [(5, "block_delta"), (5, "error"), (5, "turn_complete"), (8, "usage"),
                                      (12, "reconnect"), (13, "error")]


def test_event_names_are_spelled_only_in_events_py() -> None:
    found = {f"{_rel(path)}:{line}": name for path in _sources().values() if path != PACKAGE / "events.py"
             for line, name in event_literals(path.read_text())}
    assert found == {}
