"""The live notebook: cells, their dependency graph, and a sandboxed kernel per session.

``NotebookManager`` is the entry point (one per process); the notebook toolset
(``turnstream.toolsets.notebook``) gives the model its tools over it. Kernels run in a
bubblewrap sandbox with limits (``SandboxConfig``, ``KernelLimits``, ``PoolLimits``);
docs/security.md says what that protects against.
"""

from ..errors import KernelError, SandboxUnavailable, UnknownCellError
from .config import FileLimits, KernelLimits, PoolLimits, SandboxConfig, default_max_kernels
from .files import FileInfo
from .graph import CellNames, Graph, analyze, stale_cells
from .kernel import ExecResult, Kernel
from .manager import ChangeListener, NotebookManager
from .model import Cell, CellStatus, Language, Notebook, Output
from .persistence import InMemoryNotebooks, NotebookPersistence
from .running import RunReport
from .status import SandboxStatus

__all__ = [
    "Cell",
    "CellNames",
    "CellStatus",
    "ChangeListener",
    "ExecResult",
    "FileInfo",
    "FileLimits",
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
    "PoolLimits",
    "RunReport",
    "SandboxConfig",
    "SandboxStatus",
    "SandboxUnavailable",
    "UnknownCellError",
    "analyze",
    "default_max_kernels",
    "stale_cells",
]
