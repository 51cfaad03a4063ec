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
    walker = _Walker()
    for stmt in tree.body:
        walker.visit(stmt)
    uses = (walker.uses | (walker.deferred - walker.bound)) - _BUILTINS
    return CellNames(frozenset(walker.bound), frozenset(uses))


class _Walker:
    """Visits code in the order Python runs it: a name read before the code binds it is a use.

    Free names of function bodies are ``deferred``: they are read when the function is
    called, so a name bound later in the same cell still satisfies them.
    """

    def __init__(self, bound: set[str] | None = None) -> None:
        self.bound: set[str] = set(bound or ())
        self.uses: set[str] = set()
        self.deferred: set[str] = set()

    def load(self, name: str) -> None:
        if name not in self.bound:
            self.uses.add(name)

    def visit_all(self, nodes: Iterable[ast.AST | None]) -> None:
        for node in nodes:
            if node is not None:
                self.visit(node)

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            else:
                self.load(node.id)
        elif isinstance(node, ast.Assign):
            self.visit_all([node.value, *node.targets])
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                self.load(node.target.id)  # x += 1 reads x first
            self.visit_all([node.value, node.target])
        elif isinstance(node, ast.AnnAssign):
            self.visit_all([node.annotation, node.value, node.target])
        elif isinstance(node, ast.NamedExpr):
            self.visit_all([node.value, node.target])
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.visit_all([node.iter, node.target, *node.body, *node.orelse])
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.visit_all([item.context_expr, item.optional_vars])
            self.visit_all(node.body)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.bound.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.ExceptHandler):
            self.visit_all([node.type])
            if node.name:
                self.bound.add(node.name)
            self.visit_all(node.body)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)):
            self.visit_all([getattr(node, "pattern", None)])
            if node.name:
                self.bound.add(node.name)
        elif isinstance(node, ast.MatchMapping):
            self.visit_all([*node.keys, *node.patterns])
            if node.rest:
                self.bound.add(node.rest)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self._function(node)
        elif isinstance(node, ast.ClassDef):
            self.visit_all([*node.decorator_list, *node.bases, *(k.value for k in node.keywords)])
            body = _Walker(self.bound)  # a class body runs now, in its own namespace
            body.visit_all(node.body)
            self.uses |= body.uses
            self.deferred |= body.deferred
            self.bound.add(node.name)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = _Walker()
            for gen in node.generators:
                inner.visit_all([gen.iter, gen.target, *gen.ifs])
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            inner.visit_all(parts)
            for name in inner.uses:
                self.load(name)
            self.deferred |= inner.deferred
        else:
            self.visit_all(ast.iter_child_nodes(node))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        now: list[ast.AST | None] = [*a.defaults, *a.kw_defaults]
        if not isinstance(node, ast.Lambda):  # decorators and annotations run at definition
            now += [*node.decorator_list, node.returns]
            now += [p.annotation for p in params if p is not None]
        self.visit_all(now)
        inner = _Walker({p.arg for p in params if p is not None})
        body: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
        declared_global: set[str] = set()
        for stmt in body:
            declared_global.update(n for sub in _same_scope_nodes(stmt) if isinstance(sub, ast.Global)
                                   for n in sub.names)
            inner.visit(stmt)
        local = inner.bound - declared_global
        self.deferred |= (inner.uses | inner.deferred) - local
        self.bound |= inner.bound & declared_global
        if not isinstance(node, ast.Lambda):
            self.bound.add(node.name)


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
