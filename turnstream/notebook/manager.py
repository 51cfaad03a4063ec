"""``NotebookManager``: every session's notebook and kernel in this process.

Each change is saved through a ``NotebookPersistence`` (the store's ``load_notebook`` /
``save_notebook``; sync or async both work) and then passed to the ``on_change`` listener,
which the server broadcasts over the session's WebSocket. Messages:

* After every change::

      {"type": "notebook", "session_id": str, "version": int,
       "change": "cell_created" | "cell_updated" | "cell_deleted" | "cell_status" | "cell_output",
       "cell": {...}}

  ``cell`` is the whole cell (``Cell.to_dict()``: id, code, language, status, outputs,
  execution_count, blocked_by) except for ``cell_deleted``, where it is ``{"id": ...}``.
  ``cell_created`` also carries ``"index"`` (its position). ``cell_status`` reports
  ``running`` and ``blocked``; ``cell_output`` reports the end of a run (status and outputs).
  ``version`` is what ``save_notebook`` returned and rises with every change.
* The full state, from ``state()`` (for a client that just connected, and the model)::

      {"type": "notebook_state", "session_id": str, "version": int,
       "cells": [{...cell, "stale": bool, "defines": [...], "uses": [...], "depends_on": [...]}],
       "sandbox": {"mode": "bubblewrap" | "off" | "unavailable", "network": bool,
                   "limits": str, "warning": str | null}}

  ``sandbox.warning`` is set when cells run without a sandbox, or cannot run at all (it says
  why and what to do); the page shows it.

Kernels are sandboxed (``SandboxConfig``), limited one by one (``KernelLimits``) and together
(``PoolLimits``: a cap on live kernels, idle ones stopped). A stopped kernel's notebook keeps
its cells and outputs; its next run starts a fresh kernel and re-runs what it needs.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..errors import KernelError
from . import sqltext
from .config import KernelLimits, PoolLimits, SandboxConfig
from .graph import Graph, stale_cells
from .kernel import ExecResult, Kernel
from .model import LANGUAGES, Cell, Language, Notebook, error_output, new_cell_id
from .pool import KernelPool
from .status import SandboxStatus, probe_sandbox

log = logging.getLogger(__name__)
T = TypeVar("T")

ChangeListener = Callable[[str, dict[str, Any]], Awaitable[None]]


class NotebookPersistence(Protocol):
    """Where notebook documents live. A ``Store`` with these two methods satisfies it."""

    def load_notebook(self, session_id: str) -> dict[str, Any] | Awaitable[dict[str, Any] | None] | None:
        """The saved document, or None when the session has no notebook yet."""
        ...

    def save_notebook(self, session_id: str, doc: dict[str, Any]) -> int | Awaitable[int]:
        """Save the whole document; return its new version number."""
        ...


class InMemoryNotebooks:
    """``NotebookPersistence`` in a dict (JSON round-tripped, so a non-JSON doc fails loudly)."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {}
        self.versions: dict[str, int] = {}

    def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        raw = self.docs.get(session_id)
        return None if raw is None else dict(json.loads(raw))

    def save_notebook(self, session_id: str, doc: dict[str, Any]) -> int:
        version = self.versions.get(session_id, 0) + 1
        self.docs[session_id] = json.dumps({**doc, "version": version})
        self.versions[session_id] = version
        return version


async def _resolve(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(slots=True)
class RunReport:
    """What ``run_cell`` did: the target's final state and which upstream cells ran."""

    cell: dict[str, Any]
    ran_upstream: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    """Cells (upstream or the target) that were not run because an upstream cell failed."""
    duration: float = 0.0

    @property
    def status(self) -> str:
        return str(self.cell["status"])


@dataclass(slots=True)
class _Entry:
    notebook: Notebook
    kernel: Kernel
    run_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    commit_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class NotebookManager:
    """Owns notebooks by session id; one per process. Close it with ``aclose()``."""

    def __init__(self, persistence: NotebookPersistence | None = None,
                 on_change: ChangeListener | None = None, *, limits: KernelLimits | None = None,
                 sandbox: SandboxConfig | None = None, pool: PoolLimits | None = None,
                 cwd: str | None = None) -> None:
        self.persistence = persistence
        self.on_change = on_change
        self.limits = limits or KernelLimits()
        self.sandbox = sandbox or SandboxConfig()
        self.cwd = cwd
        """Working directory of unsandboxed kernels (a sandboxed one has its own tmpfs)."""
        self.pool = KernelPool(pool or PoolLimits(), self.limits.memory_bytes)
        self._entries: dict[str, _Entry] = {}
        self._load_lock = asyncio.Lock()
        self._status: SandboxStatus | None = None

    def probe_sandbox(self) -> SandboxStatus:
        """Start (and stop) one kernel to learn whether cells can run here, and how isolated.
        Blocks for a moment the first time; remembered per process."""
        self._status = probe_sandbox(self.sandbox, self.limits)
        return self._status

    async def sandbox_status(self) -> SandboxStatus:
        if self._status is None:
            await asyncio.to_thread(self.probe_sandbox)
        assert self._status is not None
        return self._status

    # loading -------------------------------------------------------------------------------
    async def _entry(self, session_id: str) -> _Entry:
        """The session's notebook and kernel. A notebook another process saved since this one
        last did (another server ran a turn of the session) is read again; its cells then
        count as stale here, so a run re-runs what the graph needs in this process's kernel.
        Two processes saving at once: the last save wins."""
        entry = self._entries.get(session_id)
        if entry is not None:
            await self._refresh(entry)
            return entry
        async with self._load_lock:
            entry = self._entries.get(session_id)
            if entry is None:
                doc = None
                if self.persistence is not None:
                    doc = await _resolve(self.persistence.load_notebook(session_id))
                nb = Notebook.from_doc(session_id, doc) if doc else Notebook(session_id)
                entry = _Entry(nb, Kernel(self.limits, sandbox=self.sandbox, cwd=self.cwd, pool=self.pool))
                self._entries[session_id] = entry
        return entry

    async def _refresh(self, entry: _Entry) -> None:
        if self.persistence is None or entry.run_lock.locked() or entry.commit_lock.locked():
            return  # a run or a save of this process is under way: it holds the newest copy
        doc = await _resolve(self.persistence.load_notebook(entry.notebook.session_id))
        if doc and int(doc.get("version", 0)) > entry.notebook.version:
            log.info("notebook of session %s changed in another process: read again", entry.notebook.session_id)
            entry.notebook = Notebook.from_doc(entry.notebook.session_id, doc)

    async def notebook(self, session_id: str) -> Notebook:
        """The session's notebook, loaded (or created empty) on first use."""
        return (await self._entry(session_id)).notebook

    def kernel(self, session_id: str) -> Kernel | None:
        entry = self._entries.get(session_id)
        return entry.kernel if entry else None

    # reading -------------------------------------------------------------------------------
    async def state(self, session_id: str, *, include_outputs: bool = True) -> dict[str, Any]:
        """The ``notebook_state`` message: every cell with its staleness and names."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        graph = Graph(nb.cells)
        if entry.kernel.alive and entry.kernel.generation == nb.kernel_generation:
            stale = stale_cells(nb.cells, graph, nb.ran_code, nb.live)
        else:  # the kernel stopped (idle, evicted, timed out): nothing is live in it any more
            stale = stale_cells(nb.cells, graph, {}, set())
        cells = []
        for cell in nb.cells:
            d = cell.to_dict(include_outputs=include_outputs)
            names = graph.names[cell.id]
            d.update(stale=cell.id in stale, defines=sorted(names.defines), uses=sorted(names.uses),
                     depends_on=graph.deps[cell.id])
            cells.append(d)
        status = await self.sandbox_status()
        return {"type": "notebook_state", "session_id": session_id, "version": nb.version,
                "cells": cells, "sandbox": status.to_dict()}

    # editing -------------------------------------------------------------------------------
    async def create_cell(self, session_id: str, code: str, language: Language = "python",
                          after_cell_id: str | None = None) -> Cell:
        """Add a cell after ``after_cell_id`` (at the end when None)."""
        if language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
        entry = await self._entry(session_id)
        nb = entry.notebook
        index = len(nb.cells) if after_cell_id is None else nb.index(after_cell_id) + 1
        cell = Cell(id=new_cell_id(), code=code, language=language)
        nb.cells.insert(index, cell)
        await self._commit(entry, "cell_created", cell.to_dict(), index=index)
        return cell

    async def update_cell(self, session_id: str, cell_id: str, code: str) -> Cell:
        """Replace a cell's code. It (and what depends on it) becomes stale; nothing runs."""
        entry = await self._entry(session_id)
        cell = entry.notebook.cell(cell_id)
        cell.code = code
        await self._commit(entry, "cell_updated", cell.to_dict())
        return cell

    async def delete_cell(self, session_id: str, cell_id: str) -> None:
        """Remove a cell. Names it defined stay in the kernel until it restarts."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        del nb.cells[nb.index(cell_id)]
        nb.live.discard(cell_id)
        nb.ran_code.pop(cell_id, None)
        await self._commit(entry, "cell_deleted", {"id": cell_id})

    # running -------------------------------------------------------------------------------
    async def run_cell(self, session_id: str, cell_id: str, *, timeout: float | None = None) -> RunReport:
        """Run a cell after its stale upstream cells, all within ``timeout`` seconds
        (default: the kernel's time limit). A cell whose upstream failed is ``blocked``."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        nb.cell(cell_id)  # unknown ids fail before anything runs
        budget = self.limits.time_limit if timeout is None else timeout
        started = time.monotonic()
        deadline = started + budget
        report = RunReport(cell={})
        async with entry.run_lock:
            with self.pool.using(entry.kernel):
                await self._run_chain(entry, cell_id, deadline, budget, report)
        target = nb.find(cell_id)
        report.cell = target.to_dict() if target else {"id": cell_id, "status": "deleted"}
        report.duration = time.monotonic() - started
        return report

    async def _run_chain(self, entry: _Entry, cell_id: str, deadline: float, budget: float,
                         report: RunReport) -> None:
        """Run ``cell_id`` after its stale upstream cells; a failure blocks what depends on it."""
        nb = entry.notebook
        graph = Graph(nb.cells)
        failed: dict[str, str] = {}  # cell id -> the cell whose failure it carries
        for cid in [*graph.upstream(cell_id), cell_id]:
            cell = nb.find(cid)
            if cell is None:  # deleted while we ran
                continue
            root = next((failed[d] for d in graph.deps.get(cid, []) if d in failed), None)
            if root is not None:
                failed[cid] = root
                report.blocked.append(cid)
                cell.status, cell.blocked_by, cell.outputs = "blocked", root, []
                await self._commit(entry, "cell_status", cell.to_dict())
                continue
            start_error = await self._sync_generation(entry, deadline)
            if start_error is not None:  # no kernel: the target says why, nothing else runs
                target = nb.find(cell_id)
                if target is not None:
                    await self._run_one(entry, target, deadline, budget, start_error)
                return
            if cid != cell_id and cid not in stale_cells(nb.cells, Graph(nb.cells), nb.ran_code, nb.live):
                continue
            ok = await self._run_one(entry, cell, deadline, budget, None)
            if cid != cell_id:
                report.ran_upstream.append(cid)
            if not ok:
                failed[cid] = cid

    async def _sync_generation(self, entry: _Entry, deadline: float) -> KernelError | None:
        """Start the kernel if needed and forget what ran in an earlier one: its names are
        gone. A kernel that cannot start is reported by the cell that needed it."""
        nb, kernel = entry.notebook, entry.kernel
        try:
            await kernel.start(deadline)
        except KernelError as exc:
            return exc
        if kernel.generation != nb.kernel_generation:
            nb.live.clear()
            nb.ran_code.clear()
            nb.kernel_generation = kernel.generation
        return None

    async def _run_one(self, entry: _Entry, cell: Cell, deadline: float, budget: float,
                       start_error: KernelError | None) -> bool:
        nb = entry.notebook
        code, language = cell.code, cell.language
        cell.status, cell.blocked_by = "running", None
        await self._commit(entry, "cell_status", cell.to_dict())
        left = deadline - time.monotonic()
        if start_error is not None:  # SandboxUnavailable says why no cell can run, and what to do
            result = ExecResult("error", [error_output(type(start_error).__name__, str(start_error))])
        elif left <= 0:
            result = ExecResult("error", [error_output(
                "TimeoutError", f"Not run: the run's time budget of {budget:.3g} s was used up (by "
                "the cells it depends on, or by another run it waited for). Run it again.")])
        else:
            try:
                result = await entry.kernel.execute(
                    code, language, filename=f"<cell {cell.id}>",
                    result_name=sqltext.result_name(code) if language == "sql" else None,
                    time_limit=min(self.limits.time_limit, left))
            except KernelError as exc:
                result = ExecResult("error", [error_output(type(exc).__name__, str(exc))])
        if result.restarted:
            nb.live.clear()
            nb.ran_code.clear()
        nb.execution_count += 1
        cell.execution_count = nb.execution_count
        cell.status = result.status
        cell.outputs = list(result.outputs)
        nb.ran_code[cell.id] = code
        if result.status == "success":
            nb.live.add(cell.id)
        else:
            nb.live.discard(cell.id)
        if nb.find(cell.id) is cell:
            await self._commit(entry, "cell_output", cell.to_dict())
        return result.status == "success"

    # saving and telling --------------------------------------------------------------------
    async def _commit(self, entry: _Entry, change: str, cell: dict[str, Any], **extra: Any) -> None:
        nb = entry.notebook
        async with entry.commit_lock:
            doc = nb.to_doc()
            doc["version"] = nb.version + 1
            if self.persistence is not None:
                nb.version = await _resolve(self.persistence.save_notebook(nb.session_id, doc))
            else:
                nb.version += 1
            event = {"type": "notebook", "session_id": nb.session_id, "version": nb.version,
                     "change": change, "cell": cell, **extra}
            if self.on_change is not None:
                try:
                    await self.on_change(nb.session_id, event)
                except Exception:
                    log.exception("notebook change listener failed for session %s", nb.session_id)

    # closing -------------------------------------------------------------------------------
    async def close_notebook(self, session_id: str) -> None:
        """Stop the session's kernel and forget the notebook (its document stays saved)."""
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self.pool.forget(entry.kernel)
            await entry.kernel.aclose()

    async def aclose(self) -> None:
        """Stop every kernel."""
        entries, self._entries = list(self._entries.values()), {}
        self.pool.close()
        for entry in entries:
            await entry.kernel.aclose()
