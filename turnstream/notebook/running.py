"""Running a notebook's cells in its kernel: the chain of stale upstream cells, the data files
each run reads, and stopping a run (interrupt, then kill) so that no cell stays ``running``.

``NotebookManager`` owns one ``Runs``; each session's state here is an ``Entry``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..aio import shielded
from ..errors import KernelError
from . import sqltext
from .config import KernelLimits
from .datafiles import DataFiles, load_specs
from .files import FileInfo
from .graph import Graph, stale_cells
from .kernel import ExecResult, Kernel, interrupted_output
from .model import Cell, Language, Notebook, error_output


def waits_on_note(cell_id: str) -> str:
    """Why a cell did not run: upstream cell ``cell_id`` was interrupted (the page says the same)."""
    return f"Waits on #{cell_id}, which was interrupted: run or edit it."


class Commit(Protocol):
    def __call__(self, entry: Entry, change: str | None, cell: dict[str, Any], **extra: Any) -> Awaitable[None]: ...


@dataclass(slots=True)
class RunReport:
    """What ``run_cell`` did: the target's final state and which upstream cells ran."""

    cell: dict[str, Any]
    ran_upstream: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    """Cells (upstream or the target) that were not run because an upstream cell failed."""
    duration: float = 0.0
    started: list[str] = field(default_factory=list)
    """Cells whose run began in the kernel, in order (filled in as they start)."""
    interrupted: str | None = None
    """The cell whose run was interrupted (by ``interrupt()`` or a cancelled caller)."""
    waits_on: str | None = None
    """Set when nothing ran because an upstream cell was interrupted (or timed out) and has not
    been run or edited since: that cell's id."""

    @property
    def status(self) -> str:
        return str(self.cell["status"])


@dataclass(slots=True)
class Run:
    """A cell's run in the kernel, under way."""

    cell_id: str
    task: asyncio.Future[ExecResult]
    why: str | None = None
    """Set by whoever interrupts it: the reason the cell's error gives."""


@dataclass(slots=True)
class Entry:
    """A session's notebook and kernel in this process."""

    notebook: Notebook
    kernel: Kernel
    run_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    commit_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    running: Run | None = None
    target: str | None = None
    """The cell the run under way was asked for (``running`` may be one it depends on)."""
    files: dict[str, str] = field(default_factory=dict)
    """Data files in the kernel (name -> sha256), for generation ``files_generation``."""
    files_generation: int = -1
    forgotten: bool = False
    """``forget_kernel`` has run since the kernel in use stopped (False again once a new one is)."""
    base: dict[str, Any] | None = None
    """The document as the store held it at ``notebook.version`` (None: none saved yet): what
    a save that finds a newer version merges against (``notebook.merge``)."""


class Runs:
    """Runs cells of any session: the manager hands it the session's ``Entry``."""

    def __init__(self, limits: KernelLimits, files: DataFiles, commit: Commit, runner_id: str | None) -> None:
        self.limits = limits
        self.files = files
        self.commit = commit
        self.runner_id = runner_id

    async def halt(self, entry: Entry, run: Run, why: str) -> None:
        """Interrupt ``run``; kill the kernel when it does not stop within the grace period;
        cancel it when it never reached the kernel."""
        run.why = run.why or why
        grace = self.limits.interrupt_grace
        if await entry.kernel.interrupt():
            done, _ = await asyncio.wait({run.task}, timeout=grace)
            if done:
                return
        await entry.kernel.kill_run()
        done, _ = await asyncio.wait({run.task}, timeout=grace)
        if not done:  # still starting a kernel, or waiting for one: nothing ran
            run.task.cancel()
            await asyncio.wait({run.task})

    async def chain(self, entry: Entry, cell_id: str, deadline: float, budget: float,
                    report: RunReport) -> None:
        """Run ``cell_id`` after its stale upstream cells; a failure blocks what depends on it.
        An upstream cell that was interrupted is never run again by this: nothing runs, and the
        target is ``blocked`` by it. While upstream cells run, the target is ``waiting``."""
        nb = entry.notebook
        target = nb.cell(cell_id)
        halted = next((c for c in map(nb.find, Graph(nb.cells).upstream(cell_id)) if c and c.interrupted), None)
        if halted is not None:
            report.waits_on = halted.id
            report.blocked.append(cell_id)
            target.status, target.blocked_by = "blocked", halted.id
            await self.commit(entry, "cell_status", target.to_dict())
            return
        before = (target.status, target.blocked_by)
        try:
            await self._chain(entry, cell_id, deadline, budget, report)
        finally:
            if target.status == "waiting":  # cancelled before its turn came: as it was
                target.status, target.blocked_by = before
                nb.runners.pop(cell_id, None)
                if nb.find(cell_id) is target:
                    await shielded(self.commit(entry, "cell_status", target.to_dict()))

    async def _chain(self, entry: Entry, cell_id: str, deadline: float, budget: float,
                     report: RunReport) -> None:
        nb = entry.notebook
        graph = Graph(nb.cells)
        failed: dict[str, str] = {}  # cell id -> the cell whose failure it carries
        infos: list[FileInfo] | None = None
        for cid in [*graph.upstream(cell_id), cell_id]:
            cell = nb.find(cid)
            if cell is None:  # deleted while we ran
                continue
            root = next((failed[d] for d in graph.deps.get(cid, []) if d in failed), None)
            if root is not None:
                failed[cid] = root
                report.blocked.append(cid)
                cell.status, cell.blocked_by, cell.outputs = "blocked", root, []
                await self.commit(entry, "cell_status", cell.to_dict())
                continue
            start_error = await self._sync_generation(entry, deadline)
            if start_error is None and (infos is None or entry.files_generation != entry.kernel.generation):
                # once per run, and again when a cell before this one lost the kernel
                try:
                    infos = await self._sync_files(entry)
                except KernelError as exc:
                    start_error = exc
            if start_error is not None:  # no kernel: the target says why, nothing else runs
                target = nb.find(cell_id)
                if target is not None:
                    await self._run_one(entry, target, deadline, budget, start_error, [], report)
                return
            if cid != cell_id and cid not in stale_cells(nb.cells, Graph(nb.cells), nb.ran_code, nb.live):
                continue
            current = Graph(nb.cells)
            if cid != cell_id:
                await self._wait_for(entry, cell_id, cid)
            ok = await self._run_one(entry, cell, deadline, budget, None,
                                     load_specs(nb.cells, current, cid, infos or []), report)
            if cid != cell_id:
                report.ran_upstream.append(cid)
            if not ok:
                failed[cid] = cid

    async def _wait_for(self, entry: Entry, cell_id: str, upstream: str) -> None:
        """Show ``cell_id`` as waiting for ``upstream``, which runs now."""
        target = entry.notebook.find(cell_id)
        if target is None:
            return
        target.status, target.blocked_by = "waiting", upstream
        if self.runner_id is not None:
            entry.notebook.runners[cell_id] = self.runner_id
        await self.commit(entry, "cell_status", target.to_dict())

    async def _sync_generation(self, entry: Entry, deadline: float) -> KernelError | None:
        """Start the kernel if needed and forget what ran in an earlier one: its names are
        gone. A kernel that cannot start is reported by the cell that needed it."""
        nb, kernel = entry.notebook, entry.kernel
        try:
            await kernel.start(deadline)
        except KernelError as exc:
            return exc
        if kernel.generation != nb.kernel_generation:
            await self.forget_kernel(entry)
            nb.kernel_generation = kernel.generation
            entry.forgotten = False
        return None

    async def forget_kernel(self, entry: Entry, keep: str | None = None) -> None:
        """The kernel is gone (restarted, timed out, crashed, stopped when idle): nothing that
        ran is live any more, and every cell that ran (but ``keep``, whose run ended it) shows
        its outputs as from the previous kernel."""
        nb = entry.notebook
        entry.forgotten = True
        nb.live.clear()
        nb.ran_code.clear()
        for cell in nb.cells:
            if cell.id != keep and cell.execution_count is not None and not cell.previous_kernel:
                cell.previous_kernel = True
                await self.commit(entry, "cell_status", cell.to_dict())

    async def _sync_files(self, entry: Entry) -> list[FileInfo]:
        if entry.files_generation != entry.kernel.generation:
            entry.files.clear()
            entry.files_generation = entry.kernel.generation
        return await self.files.sync(entry.notebook.session_id, entry.kernel, entry.files)

    async def _run_one(self, entry: Entry, cell: Cell, deadline: float, budget: float,
                       start_error: KernelError | None, load: list[dict[str, Any]], report: RunReport) -> bool:
        nb = entry.notebook
        code, language = cell.code, cell.language
        cell.status, cell.blocked_by = "running", None
        if self.runner_id is not None:
            nb.runners[cell.id] = self.runner_id
        run: Run | None = None
        try:
            await self.commit(entry, "cell_status", cell.to_dict())
            left = deadline - time.monotonic()
            if start_error is not None:  # SandboxUnavailable says why no cell can run, and what to do
                result = ExecResult("error", [error_output(type(start_error).__name__, str(start_error))])
            elif left <= 0:
                result = ExecResult("error", [error_output(
                    "TimeoutError", f"Not run: the run's time budget of {budget:.3g} s was used up (by "
                    "the cells it depends on, or by another run it waited for). Run it again.")])
            else:
                run = Run(cell.id, asyncio.ensure_future(self._execute(entry, cell, code, language, left, load)))
                entry.running = run
                report.started.append(cell.id)
                result = await asyncio.shield(run.task)
        except asyncio.CancelledError:
            # The caller is cancelled (a turn cancelled, a deadline): stop the cell, record how
            # it ended, and let the cancellation go on.
            await shielded(self._stop_and_finish(entry, cell, code, run, report))
            raise
        await shielded(self._finish(entry, cell, code, run, result, report))
        return result.status == "success"

    async def _stop_and_finish(self, entry: Entry, cell: Cell, code: str, run: Run | None,
                               report: RunReport) -> None:
        why = "because the run's caller was cancelled"
        if run is None:
            result = ExecResult("error", [interrupted_output(f"Interrupted {why}, before it started.")])
        else:
            await self.halt(entry, run, why)
            if run.task.cancelled():
                result = ExecResult("error", [interrupted_output("before it reached the kernel.")])
            else:
                result = run.task.result()
        await self._finish(entry, cell, code, run, result, report)

    async def _execute(self, entry: Entry, cell: Cell, code: str, language: Language, left: float,
                       load: list[dict[str, Any]]) -> ExecResult:
        try:
            return await entry.kernel.execute(
                code, language, filename=f"<cell {cell.id}>",
                result_name=sqltext.result_name(code) if language == "sql" else None,
                time_limit=min(self.limits.time_limit, left), load=load)
        except KernelError as exc:
            return ExecResult("error", [error_output(type(exc).__name__, str(exc))])

    async def _finish(self, entry: Entry, cell: Cell, code: str, run: Run | None, result: ExecResult,
                      report: RunReport) -> None:
        nb = entry.notebook
        if entry.running is run:
            entry.running = None
        if run is not None and run.why is not None:
            report.interrupted = cell.id
            for out in result.outputs:
                if out["type"] == "error" and out.get("interrupted"):
                    out["evalue"] = f"Interrupted {run.why}. " + (
                        out["evalue"] if result.restarted else "The kernel kept its variables.")
        if result.restarted:
            await self.forget_kernel(entry, keep=cell.id)
        nb.execution_count += 1
        cell.execution_count = nb.execution_count
        cell.status = result.status
        cell.outputs = list(result.outputs)
        cell.previous_kernel = False
        cell.interrupted = code == cell.code and any(
            o["type"] == "error" and (o.get("interrupted") or o.get("timed_out")) for o in result.outputs)
        nb.runners.pop(cell.id, None)
        nb.ran_code[cell.id] = code
        if result.status == "success":
            nb.live.add(cell.id)
        else:
            nb.live.discard(cell.id)
        if nb.find(cell.id) is cell:
            await self.commit(entry, "cell_output", cell.to_dict())


__all__ = ["Entry", "Run", "RunReport", "Runs", "waits_on_note"]
