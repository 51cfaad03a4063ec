"""The package's rooms: no import circle between modules, and no module past about 400 lines
unless its docstring says why it is one decision."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "turnstream"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, but those under ``if TYPE_CHECKING:`` (imports for the type checker only)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            todo.append(child)
    return out


def _imports(path: Path) -> set[str]:
    """Modules of the package a module imports, at import time or later (a function-level
    import closes a circle as surely, only later)."""
    tree = ast.parse(path.read_text())
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("turnstream"):
                if node.module:  # ``from . import x`` names submodules, not the package itself
                    out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("turnstream"))
    return out


def test_no_import_circles() -> None:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: {i for i in _imports(p) if i in modules and i != m} for m, p in modules.items()}
    # A package imports its submodules to re-export them; a submodule importing its own
    # package's __init__ is the circle to catch, so edges into a package are kept.
    circles = []
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                circles.append([*path[path.index(n):], n] if n in path else [m, n])
            elif n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    real = [c for c in circles
            if not all(a.startswith(b + ".") or b.startswith(a + ".") for a, b in itertools.pairwise(c))]
    assert real == []


def test_large_modules_say_why() -> None:
    large = {p.relative_to(PACKAGE.parent).as_posix(): p for p in PACKAGE.rglob("*.py")
             if len(p.read_text().splitlines()) > MAX_LINES}
    unexplained = [name for name, p in large.items()
                   if "Why one module" not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert unexplained == []
