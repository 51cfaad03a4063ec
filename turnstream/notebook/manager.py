"""``NotebookManager``: every session's notebook and kernel in this process.

The assistant (the notebook toolset) and the user (the server's notebook routes) edit and run
the same notebook through this one object. Each change is saved through a
``NotebookPersistence`` (the store's ``load_notebook`` / ``save_notebook``; sync or async both
work) and then passed to the ``on_change`` listener, which the server broadcasts over the
session's WebSocket. Messages:

* After every change::

      {"type": "notebook", "session_id": str, "version": int,
       "change": "cell_created" | "cell_updated" | "cell_moved" | "cell_deleted" | "cell_status"
                 | "cell_output",
       "cell": {...}}

  ``cell`` is the whole cell (``Cell.to_dict()``: id, code, language, status, outputs,
  execution_count, blocked_by, edited_by) except for ``cell_deleted``, where it is
  ``{"id": ...}``. ``cell_created`` and ``cell_moved`` also carry ``"index"`` (its position).
  ``cell_status`` reports ``running`` and ``blocked``; ``cell_output`` reports the end of a run
  (status and outputs). ``version`` is what ``save_notebook`` returned and rises with every
  change.
* After the data files changed: ``{"type": "notebook_files", "session_id": str, "files": [...]}``
  (``FileInfo.to_dict()`` each).
* The full state, from ``state()`` (for a client that just connected, and the model)::

      {"type": "notebook_state", "session_id": str, "version": int,
       "cells": [{...cell, "stale": bool, "defines": [...], "uses": [...], "depends_on": [...]}],
       "files": [...],
       "sandbox": {"mode": "bubblewrap" | "off" | "unavailable", "network": bool,
                   "limits": str, "warning": str | null}}

  ``sandbox.warning`` is set when cells run without a sandbox, or cannot run at all (it says
  why and what to do); the page shows it.

Editing rules (docs/notebook.md): every edit applies at once and is broadcast; an edit that
names ``base_code`` (the code its author started from) is refused with ``EditConflict`` when
the cell's code is no longer that, so a user's edit never silently overwrites the assistant's
or another tab's. The assistant's edits carry no base: they apply, and ``replaced_unseen``
tells the toolset when it replaced code the assistant never read.

Interrupts: ``interrupt()`` stops a run of this process (a ``KeyboardInterrupt`` in the cell;
after ``KernelLimits.interrupt_grace`` seconds the kernel is killed instead). A run whose
caller is cancelled (a cancelled turn, a tool's deadline) is interrupted the same way before
the cancellation goes on, so no cell stays ``running``; a cell a dead process left ``running``
is shown as interrupted when the notebook is next loaded.

Kernels are sandboxed (``SandboxConfig``), limited one by one (``KernelLimits``) and together
(``PoolLimits``: a cap on live kernels, idle ones stopped). A stopped kernel's notebook keeps
its cells and outputs; its next run starts a fresh kernel and re-runs what it needs.

Why one module of this size: it is the one way into a notebook for the assistant's tools and
the user's routes alike, so every edit, save and conflict rule is decided here once; running
cells (``running.py``), merging saves (``merge.py``) and files (``datafiles.py``) are apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..aio import shielded
from ..errors import EditConflict, InvalidValue, StaleNotebook
from .config import FileLimits, KernelLimits, PoolLimits, SandboxConfig
from .datafiles import DataFiles, users_of
from .describe import describe
from .files import FileInfo
from .graph import Graph, stale_cells
from .kernel import Kernel, interrupted_output
from .merge import apply_doc, merge_docs
from .model import LANGUAGES, Cell, Editor, Language, Notebook, code_hash, new_cell_id
from .persistence import FileStore, InMemoryNotebooks, NotebookPersistence, resolve
from .pool import KernelPool, PooledKernel
from .running import Entry, RunReport, Runs
from .status import SandboxStatus, probe_sandbox

log = logging.getLogger(__name__)

ChangeListener = Callable[[str, dict[str, Any]], Awaitable[None]]
DEAD_RUN = ("The server process running this cell stopped before the run finished, so it never "
            "ended. Run it again.")


class NotebookManager:
    """Owns notebooks by session id; one per process. Close it with ``aclose()``."""

    def __init__(self, persistence: NotebookPersistence | None = None,
                 on_change: ChangeListener | None = None, *, limits: KernelLimits | None = None,
                 sandbox: SandboxConfig | None = None, pool: PoolLimits | None = None,
                 files: FileLimits | None = None, cwd: str | None = None) -> None:
        self.persistence = persistence
        self.on_change = on_change
        self.limits = limits or KernelLimits()
        self.sandbox = sandbox or SandboxConfig()
        self.cwd = cwd
        """Working directory of unsandboxed kernels (a sandboxed one has its own tmpfs)."""
        self.pool = KernelPool(pool or PoolLimits(), self.limits.memory_bytes)
        self.files = DataFiles(persistence if isinstance(persistence, FileStore) else InMemoryNotebooks(),
                               files or FileLimits(), self._describe)
        self.runner_id: str | None = getattr(persistence, "runner_id", None)
        """This process as the store knows it (who runs a ``running`` cell)."""
        self._runs = Runs(self.limits, self.files, self._commit, self.runner_id)
        self._entries: dict[str, Entry] = {}
        self._load_lock = asyncio.Lock()
        self._status: SandboxStatus | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the notebooks are served in (the pool's reaper thread reports to it)."""
        self._notes: set[asyncio.Task[None]] = set()
        self.pool.on_stop = self._stopped_by_pool

    async def _describe(self, infos: Sequence[FileInfo], data: Sequence[bytes]) -> list[FileInfo]:
        """Read uploads' shapes in a sandboxed process of their own (``describe.py``)."""
        return await describe(infos, data, self.limits, self.sandbox, self.pool)

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
    async def _entry(self, session_id: str) -> Entry:
        """The session's notebook and kernel. A notebook another process saved since this one
        last did (another server ran a turn of the session) is read again; its cells then
        count as stale here, so a run re-runs what the graph needs in this process's kernel.
        Two processes saving at once: the second save merges both changes (``_commit``)."""
        entry = self._entries.get(session_id)
        if entry is not None:
            await self._refresh(entry)
            return entry
        async with self._load_lock:
            self._loop = asyncio.get_running_loop()
            entry = self._entries.get(session_id)
            if entry is None:
                doc = None
                if self.persistence is not None:
                    doc = await resolve(self.persistence.load_notebook(session_id))
                nb = Notebook.from_doc(session_id, doc) if doc else Notebook(session_id)
                entry = Entry(nb, Kernel(self.limits, sandbox=self.sandbox, cwd=self.cwd, pool=self.pool),
                              base=doc or None)
                self._entries[session_id] = entry
        await self._end_dead_runs(entry)
        return entry

    def _stopped_by_pool(self, kernel: PooledKernel) -> None:
        """The pool stopped ``kernel`` (idle, or to make room; maybe in its reaper thread): its
        notebook's page is told at once that what ran is from the previous kernel."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._note_stopped, kernel)

    def _note_stopped(self, kernel: PooledKernel) -> None:
        for entry in self._entries.values():
            if entry.kernel is kernel:
                task = asyncio.ensure_future(self._forget_stopped(entry))
                self._notes.add(task)
                task.add_done_callback(self._notes.discard)

    async def _forget_stopped(self, entry: Entry) -> None:
        try:
            async with entry.run_lock:
                if not entry.kernel.alive and not entry.forgotten:
                    await self._runs.forget_kernel(entry)
        except Exception:
            log.exception("notebook of session %s: could not mark the stopped kernel's cells",
                          entry.notebook.session_id)

    async def _refresh(self, entry: Entry) -> None:
        if self.persistence is None or entry.run_lock.locked() or entry.commit_lock.locked():
            return  # a run or a save of this process is under way: it holds the newest copy
        doc = await resolve(self.persistence.load_notebook(entry.notebook.session_id))
        if doc and int(doc.get("version", 0)) > entry.notebook.version:
            log.info("notebook of session %s changed in another process: read again", entry.notebook.session_id)
            entry.notebook = Notebook.from_doc(entry.notebook.session_id, doc)
            entry.base = doc
        if any(c.status in ("running", "waiting") for c in entry.notebook.cells):
            await self._end_dead_runs(entry)  # the process running it may have died since

    async def _end_dead_runs(self, entry: Entry) -> None:
        """Cells saved ``running`` by a process that is gone never finish: say so."""
        nb = entry.notebook
        for cell in [c for c in nb.cells if c.status in ("running", "waiting")]:
            if cell.id == entry.target or (entry.running is not None and entry.running.cell_id == cell.id):
                continue
            runner = nb.runners.get(cell.id)
            if runner is not None and runner != self.runner_id and await self._alive(runner):
                continue  # another server process runs it now
            nb.runners.pop(cell.id, None)
            if cell.status == "waiting":  # its run never began
                cell.status, cell.blocked_by = "idle", None
                await self._commit(entry, "cell_status", cell.to_dict())
                continue
            cell.status, cell.outputs = "error", [interrupted_output(DEAD_RUN)]
            await self._commit(entry, "cell_output", cell.to_dict())

    async def _alive(self, runner: str) -> bool:
        check = getattr(self.persistence, "runner_alive", None)
        return bool(await check(runner)) if check is not None else False

    async def notebook(self, session_id: str) -> Notebook:
        """The session's notebook, loaded (or created empty) on first use."""
        return (await self._entry(session_id)).notebook

    def cell_snapshot(self, session_id: str, cell_id: str) -> dict[str, Any] | None:
        """A cell as this process holds it now, without loading anything (None if unknown)."""
        entry = self._entries.get(session_id)
        cell = entry.notebook.find(cell_id) if entry is not None else None
        return cell.to_dict() if cell is not None else None

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
            if not entry.forgotten:  # stopped by the pool (idle, evicted): nobody said so yet
                await self._runs.forget_kernel(entry)
            stale = stale_cells(nb.cells, graph, {}, set())
        cells = []
        for cell in nb.cells:
            d = cell.to_dict(include_outputs=include_outputs)
            names = graph.names[cell.id]
            d.update(stale=cell.id in stale, defines=sorted(names.defines), uses=sorted(names.uses),
                     depends_on=graph.deps[cell.id])
            cells.append(d)
        status = await self.sandbox_status()
        files = [f.to_dict() for f in await self.files.infos(session_id)]
        return {"type": "notebook_state", "session_id": session_id, "version": nb.version,
                "cells": cells, "files": files, "sandbox": status.to_dict()}

    async def mark_seen(self, session_id: str) -> None:
        """The assistant has read every cell's code as it stands (``get_notebook_state``)."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        seen = {c.id: code_hash(c.code) for c in nb.cells}
        if seen != nb.seen:
            nb.seen = seen
            await self._commit(entry, None, {})

    def replaced_unseen(self, nb: Notebook, cell: Cell) -> bool:
        """Whether the assistant is about to replace code of ``cell`` it never read."""
        return cell.edited_by == "user" and nb.seen.get(cell.id) != code_hash(cell.code)

    # editing -------------------------------------------------------------------------------
    async def create_cell(self, session_id: str, code: str, language: Language = "python",
                          after_cell_id: str | None = None, *, index: int | None = None,
                          by: Editor = "assistant") -> Cell:
        """Add a cell after ``after_cell_id``, or at ``index``, or at the end."""
        if language not in LANGUAGES:
            raise InvalidValue("language", f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
        entry = await self._entry(session_id)
        nb = entry.notebook
        if after_cell_id is not None:
            index = nb.index(after_cell_id) + 1
        elif index is None or index > len(nb.cells):
            index = len(nb.cells)
        cell = Cell(id=new_cell_id(), code=code, language=language, edited_by=by)
        nb.cells.insert(index, cell)
        if by == "assistant":
            nb.seen[cell.id] = code_hash(code)
        await self._commit(entry, "cell_created", cell.to_dict(), index=index)
        return cell

    async def update_cell(self, session_id: str, cell_id: str, code: str | None = None, *,
                          language: Language | None = None, index: int | None = None,
                          base_code: str | None = None, by: Editor = "assistant") -> Cell:
        """Change a cell's code and language, and move it to ``index``. The cell (and what
        depends on it) becomes stale; nothing runs. With ``base_code``, ``EditConflict`` when
        the cell's code is no longer that (nothing changes)."""
        if language is not None and language not in LANGUAGES:
            raise InvalidValue("language", f"language must be one of {', '.join(LANGUAGES)}, not {language!r}")
        entry = await self._entry(session_id)
        nb = entry.notebook
        cell = nb.cell(cell_id)
        if base_code is not None and base_code != cell.code:
            raise EditConflict(cell_id, cell.to_dict())
        if (code is not None and code != cell.code) or (language is not None and language != cell.language):
            cell.code = cell.code if code is None else code
            cell.language = cell.language if language is None else language
            cell.edited_by = by
            cell.interrupted = False  # edited: a dependent's run may run it again
            if by == "assistant":
                nb.seen[cell.id] = code_hash(cell.code)
            await self._commit(entry, "cell_updated", cell.to_dict())
        if index is not None and index != nb.index(cell_id):
            nb.cells.remove(cell)
            index = min(max(index, 0), len(nb.cells))
            nb.cells.insert(index, cell)
            await self._commit(entry, "cell_moved", cell.to_dict(), index=index)
        return cell

    async def delete_cell(self, session_id: str, cell_id: str) -> None:
        """Remove a cell. Names it defined stay in the kernel until it restarts."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        del nb.cells[nb.index(cell_id)]
        nb.live.discard(cell_id)
        nb.ran_code.pop(cell_id, None)
        nb.seen.pop(cell_id, None)
        await self._commit(entry, "cell_deleted", {"id": cell_id})
        for cell in nb.cells:  # nothing stays blocked by (or waiting for) a cell that is gone
            if cell.blocked_by == cell_id and cell.status == "blocked":
                cell.status, cell.blocked_by = "idle", None
                await self._commit(entry, "cell_status", cell.to_dict())

    async def replace_cells(self, session_id: str, cells: list[Cell]) -> None:
        """Append ``cells`` (an imported ``.ipynb``) without running them; the import route
        checks first that the notebook is empty."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        first = len(nb.cells)
        nb.cells.extend(cells)
        await self._commit(entry, None, {})  # one save for them all, then a message per cell
        for i, cell in enumerate(cells):
            await self._tell(session_id, {"type": "notebook", "session_id": session_id, "version": nb.version,
                                          "change": "cell_created", "cell": cell.to_dict(), "index": first + i})

    # data files ----------------------------------------------------------------------------
    async def add_files(self, session_id: str, uploads: list[tuple[str, bytes]]) -> list[FileInfo]:
        """Store data files (see ``DataFiles.add``); cells that read their variables become stale."""
        infos = await self.files.add(session_id, uploads)
        await self._files_changed(session_id, [i.variable for i in infos])
        return infos

    async def delete_file(self, session_id: str, name: str) -> bool:
        infos = {f.name: f for f in await self.files.infos(session_id)}
        deleted = await self.files.remove(session_id, name)
        if deleted and name in infos:
            await self._files_changed(session_id, [infos[name].variable])
        return deleted

    async def _files_changed(self, session_id: str, variables: list[str]) -> None:
        entry = await self._entry(session_id)
        nb = entry.notebook
        graph = Graph(nb.cells)
        for variable in variables:
            for cid in users_of(nb.cells, graph, variable):
                nb.live.discard(cid)
        if self.on_change is not None:
            files = [f.to_dict() for f in await self.files.infos(session_id)]
            await self._tell(session_id, {"type": "notebook_files", "session_id": session_id, "files": files})

    # running -------------------------------------------------------------------------------
    async def run_cell(self, session_id: str, cell_id: str, *, timeout: float | None = None,
                       report: RunReport | None = None) -> RunReport:
        """Run a cell after its stale upstream cells, all within ``timeout`` seconds
        (default: the kernel's time limit). A cell whose upstream failed is ``blocked``.
        ``report`` (filled in as the run goes) lets a caller that is cancelled see what began."""
        entry = await self._entry(session_id)
        nb = entry.notebook
        nb.cell(cell_id)  # unknown ids fail before anything runs
        budget = self.limits.time_limit if timeout is None else timeout
        started = time.monotonic()
        deadline = started + budget
        report = report or RunReport(cell={})
        async with entry.run_lock:
            entry.target = cell_id
            try:
                with self.pool.using(entry.kernel):
                    await self._runs.chain(entry, cell_id, deadline, budget, report)
            finally:
                entry.target = None
        target = entry.notebook.find(cell_id)
        report.cell = target.to_dict() if target else {"id": cell_id, "status": "deleted"}
        report.duration = time.monotonic() - started
        return report

    async def restart(self, session_id: str, *, run_all: bool = False,
                      timeout: float | None = None) -> list[RunReport]:
        """Restart the session's kernel: a run under way is interrupted, the kernel stops (the
        next run starts a fresh one) and every cell that ran is marked as from the previous
        kernel. With ``run_all``, then run every cell in order (each within ``timeout``),
        stopping after the first that does not succeed; the reports of those runs."""
        entry = await self._entry(session_id)
        run = entry.running
        if run is not None:
            await shielded(self._runs.halt(entry, run, "because the kernel was restarted"))
        async with entry.run_lock:
            await entry.kernel.aclose()
            await self._runs.forget_kernel(entry)
        reports: list[RunReport] = []
        for cell_id in [c.id for c in entry.notebook.cells] if run_all else []:
            if entry.notebook.find(cell_id) is None:
                continue
            reports.append(await self.run_cell(session_id, cell_id, timeout=timeout))
            if reports[-1].status != "success":
                break
        return reports

    async def interrupt(self, session_id: str, cell_id: str | None = None, *, why: str = "by the user") -> bool:
        """Stop the run of ``cell_id`` (of any cell when None) if this process runs it, or runs
        a cell it waits for; True when one was stopped. Returns when the run has ended (within
        the grace period, or once the kernel is killed)."""
        entry = self._entries.get(session_id)
        run = entry.running if entry is not None else None
        if entry is None or run is None or cell_id not in (None, run.cell_id, entry.target):
            return False
        await shielded(self._runs.halt(entry, run, why))
        return True

    # saving and telling --------------------------------------------------------------------
    async def _commit(self, entry: Entry, change: str | None, cell: dict[str, Any], **extra: Any) -> None:
        """Save the notebook; tell the listener about ``change`` (None: a save nobody sees)."""
        nb = entry.notebook
        async with entry.commit_lock:
            if self.persistence is None:
                nb.version += 1
            else:
                await self._save(entry)
            if change is not None:
                await self._tell(nb.session_id, {"type": "notebook", "session_id": nb.session_id,
                                                 "version": nb.version, "change": change, "cell": cell, **extra})

    async def _save(self, entry: Entry) -> None:
        """Save the notebook on top of the version this process last read or saved. When
        another process saved since, merge both changes into the notebook here (its cells
        stay the same objects) and save the merge on top of that version instead."""
        assert self.persistence is not None
        nb = entry.notebook
        while True:
            doc = nb.to_doc()
            doc["version"] = nb.version + 1
            try:
                nb.version = await resolve(self.persistence.save_notebook(nb.session_id, doc, base=nb.version))
            except StaleNotebook:
                theirs = await resolve(self.persistence.load_notebook(nb.session_id))
                assert theirs is not None  # a notebook is deleted only with its session
                log.info("notebook of session %s was saved by another process meanwhile: merged",
                         nb.session_id)
                apply_doc(nb, merge_docs(entry.base, doc, theirs))
                nb.version, entry.base = int(theirs["version"]), theirs
                continue
            doc["version"] = nb.version
            entry.base = doc
            return

    async def _tell(self, session_id: str, message: dict[str, Any]) -> None:
        if self.on_change is not None:
            try:
                await self.on_change(session_id, message)
            except Exception:
                log.exception("notebook change listener failed for session %s", session_id)

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
