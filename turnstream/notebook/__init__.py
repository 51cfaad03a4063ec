"""The live notebook: cells, their dependency graph, and a subprocess kernel per session.

``NotebookManager`` is the entry point (one per process); the notebook toolset
(``turnstream.toolsets.notebook``) gives the model its tools over it.
"""

from ..errors import KernelError, UnknownCellError
from .graph import CellNames, Graph, analyze, stale_cells
from .kernel import ExecResult, Kernel, KernelLimits
from .manager import ChangeListener, InMemoryNotebooks, NotebookManager, NotebookPersistence, RunReport
from .model import Cell, CellStatus, Language, Notebook, Output

__all__ = [
    "Cell",
    "CellNames",
    "CellStatus",
    "ChangeListener",
    "ExecResult",
    "Graph",
    "InMemoryNotebooks",
    "Kernel",
    "KernelError",
    "KernelLimits",
    "Language",
    "Notebook",
    "NotebookManager",
    "NotebookPersistence",
    "Output",
    "RunReport",
    "UnknownCellError",
    "analyze",
    "stale_cells",
]
