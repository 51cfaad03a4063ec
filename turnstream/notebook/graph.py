"""Which names a cell defines and uses, the dependencies between cells, and staleness.

A cell depends on the nearest cell *above it* that defines a name it uses. Depending only
on cells above keeps the graph acyclic by construction, so document order is a valid run
order. Names nobody defines (builtins, names created by hand in the kernel) link to nothing.

* Python: module-level bindings (assignments, ``for`` / ``with`` targets, imports, ``def`` and
  ``class``, ``global`` inside functions) are defined; names read before the cell binds them,
  including free names inside functions, lambdas and comprehensions, are used. Builtins are
  left out. Code that does not parse defines and uses nothing (running it shows the error).
* SQL: see ``sqltext``: ``{{name}}`` parameters and FROM/JOIN tables are used; a leading
  ``-- name: x`` comment defines ``x``.

A cell is *stale* when it never ran in the current kernel, did not succeed, its code changed
since it ran, or one of its upstream cells is stale or ran after it.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import sqltext
from .model import Cell, Language

_BUILTINS = frozenset(dir(builtins))
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True, slots=True)
class CellNames:
    defines: frozenset[str] = frozenset()
    uses: frozenset[str] = frozenset()


def analyze(language: Language, code: str) -> CellNames:
    return python_names(code) if language == "python" else sql_names(code)


def sql_names(code: str) -> CellNames:
    name = sqltext.result_name(code)
    used = set(sqltext.param_names(code)) | set(sqltext.table_refs(code))
    return CellNames(frozenset([name]) if name else frozenset(), frozenset(used))


def python_names(code: str) -> CellNames:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return CellNames()
    defined: set[str] = set()
    used: set[str] = set()
    for stmt in tree.body:
        loads: set[str] = set()
        stores: set[str] = set()
        _collect(stmt, loads, stores)
        used |= loads - defined
        defined |= stores
    return CellNames(frozenset(defined), frozenset(used - _BUILTINS))


def _collect(node: ast.AST, loads: set[str], stores: set[str]) -> None:
    """Names read and bound by ``node`` in the current scope; nested scopes add their free names."""
    if isinstance(node, ast.Name):
        (stores if isinstance(node.ctx, ast.Store) else loads).add(node.id)
        return
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        loads.add(node.target.id)  # x += 1 reads x first
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            if alias.name != "*":
                stores.add(alias.asname or alias.name.split(".")[0])
        return
    if isinstance(node, ast.ExceptHandler) and node.name:
        stores.add(node.name)
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        stores.add(node.name)
    if isinstance(node, ast.MatchMapping) and node.rest:
        stores.add(node.rest)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        stores.add(node.name)
        for deco in node.decorator_list:
            _collect(deco, loads, stores)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = node.args
        evaluated_here: list[ast.expr | None] = [*a.defaults, *a.kw_defaults]
        if not isinstance(node, ast.Lambda):  # annotations are evaluated where the def runs
            evaluated_here.append(node.returns)
            for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                evaluated_here.append(p.annotation if p is not None else None)
        for expr in evaluated_here:
            if expr is not None:
                _collect(expr, loads, stores)
    if isinstance(node, ast.ClassDef):
        for base in [*node.bases, *(k.value for k in node.keywords)]:
            _collect(base, loads, stores)
        inner_loads: set[str] = set()
        inner_stores: set[str] = set()
        for stmt in node.body:
            _collect(stmt, inner_loads, inner_stores)
        loads |= inner_loads - inner_stores
        return
    if isinstance(node, _SCOPES):
        free, global_stores = _free_names(node)
        loads |= free
        stores |= global_stores
        return
    for child in ast.iter_child_nodes(node):
        _collect(child, loads, stores)


def _free_names(scope: ast.AST) -> tuple[set[str], set[str]]:
    """Names a function-like scope reads from outside, and module names it binds via ``global``."""
    loads: set[str] = set()
    stores: set[str] = set()
    params: set[str] = set()
    body: list[ast.AST]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        params |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
        body = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    else:
        assert isinstance(scope, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
        body = list(scope.generators)
        body += [scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt]
    declared_global: set[str] = set()
    for stmt in body:
        for sub in _same_scope_nodes(stmt):
            if isinstance(sub, ast.Global):
                declared_global.update(sub.names)
        _collect(stmt, loads, stores)
    local = (params | stores) - declared_global
    return loads - local, stores & declared_global


def _same_scope_nodes(node: ast.AST) -> Iterable[ast.AST]:
    yield node
    if isinstance(node, (*_SCOPES, ast.ClassDef)):
        return
    for child in ast.iter_child_nodes(node):
        yield from _same_scope_nodes(child)


class Graph:
    """Direct dependencies of each cell, built from the cells in document order."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        self.order = [c.id for c in cells]
        self.names = {c.id: analyze(c.language, c.code) for c in cells}
        self.deps: dict[str, list[str]] = {}
        latest: dict[str, str] = {}  # name -> id of the nearest cell above that defines it
        for cell in cells:
            names = self.names[cell.id]
            direct = {latest[n] for n in names.uses if n in latest}
            self.deps[cell.id] = [cid for cid in self.order if cid in direct]
            for n in names.defines:
                latest[n] = cell.id

    def upstream(self, cell_id: str) -> list[str]:
        """Every cell ``cell_id`` depends on, directly or not, in document order."""
        seen: set[str] = set()
        todo = list(self.deps.get(cell_id, []))
        while todo:
            cid = todo.pop()
            if cid not in seen:
                seen.add(cid)
                todo.extend(self.deps[cid])
        return [cid for cid in self.order if cid in seen]

    def downstream(self, cell_id: str) -> list[str]:
        """Every cell that depends on ``cell_id``, directly or not, in document order."""
        hit = {cell_id}
        for cid in self.order:
            if any(d in hit for d in self.deps[cid]):
                hit.add(cid)
        hit.discard(cell_id)
        return [cid for cid in self.order if cid in hit]


def stale_cells(cells: Sequence[Cell], graph: Graph, ran_code: dict[str, str],
                live: set[str]) -> set[str]:
    """Ids of the cells that need to run again (see the module docstring)."""
    counts = {c.id: c.execution_count or 0 for c in cells}
    stale: set[str] = set()
    for cell in cells:  # upstream cells come first, so their verdict is known
        if (
            cell.id not in live
            or cell.status != "success"
            or ran_code.get(cell.id) != cell.code
            or any(d in stale or counts[d] > counts[cell.id] for d in graph.deps[cell.id])
        ):
            stale.add(cell.id)
    return stale
