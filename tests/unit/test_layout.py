"""The package's rooms: no module past about 400 lines unless its docstring says why it is one
decision (the hard limits, import circles and event names: ``test_layout_rooms.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "turnstream"
MAX_LINES = 400


def test_large_modules_say_why() -> None:
    large = {p.relative_to(PACKAGE.parent).as_posix(): p for p in PACKAGE.rglob("*.py")
             if len(p.read_text().splitlines()) > MAX_LINES}
    unexplained = [name for name, p in large.items()
                   if "Why one module" not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert unexplained == []
