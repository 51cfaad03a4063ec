"""Restarting a kernel, and the runs that must not cost the user their work (issue 26: N1, N5):
an interrupt that lands inside an import, an interrupted cell that a dependent would re-run,
the marks of cells whose kernel is gone, and "blocked by" a cell that was deleted. All on a
real sandboxed kernel."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from tests.support.processes import cmdline, descendants
from turnstream.notebook import Cell, InMemoryNotebooks, KernelLimits, NotebookManager, RunReport

pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count()

# A package whose import takes as long as its `delay` file says, and whose submodule, imported
# first, keeps a reference to the package: after an import stopped halfway, importing it again in
# the same process finds the submodule bound to the half-made package (as pandas'
# `_pandas_datetime_CAPI` error). Cell 1 writes it into the kernel's working directory.
WRITE_PACKAGE = '''import os, sys
pkgdir = os.path.abspath("slowpkg-{tag}")
os.makedirs(os.path.join(pkgdir, "slowpkg"), exist_ok=True)
def put(name, text):
    with open(os.path.join(pkgdir, "slowpkg", name), "w") as f:
        f.write(text)
put("__init__.py", "import time\\nfrom . import fast\\n"
    "time.sleep(float(open(__file__.replace('__init__.py', 'delay')).read()))\\nREADY = 'ready'\\n")
put("fast.py", "import slowpkg\\ndef ok():\\n    return slowpkg.READY\\n")
put("delay", "{delay}")
'''
IMPORT_PACKAGE = "import sys\nsys.path.insert(0, pkgdir)\nimport slowpkg\nslowpkg.fast.ok()"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def manager() -> AsyncIterator[NotebookManager]:
    m = NotebookManager(InMemoryNotebooks(), limits=KernelLimits(time_limit=3.0, interrupt_grace=1.0))
    yield m
    await m.aclose()


@pytest.fixture
def sid() -> str:
    return f"restart-{next(_ids)}"


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)  # polling the manager's state with a deadline


def status_is(manager: NotebookManager, sid: str, cell_id: str, *statuses: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await manager.notebook(sid)).cell(cell_id).status in statuses
    return check


def importing(manager: NotebookManager, sid: str) -> Callable[[], Awaitable[bool]]:
    """Whether the kernel's main thread sleeps (in the slow import: nothing else sleeps there)."""
    async def check() -> bool:
        kernel = manager.kernel(sid)
        if kernel is None or kernel.pid is None:
            return False
        for pid in descendants(kernel.pid) | {kernel.pid}:
            try:
                with open(f"/proc/{pid}/wchan") as f:
                    if "child.py" in cmdline(pid) and "nanosleep" in f.read():
                        return True
            except OSError:
                continue
        return False
    return check


async def cells(manager: NotebookManager, sid: str) -> dict[str, dict[str, object]]:
    return {c["id"]: c for c in (await manager.state(sid))["cells"]}


async def start_slow_import(manager: NotebookManager, sid: str) -> tuple[Cell, Cell, asyncio.Future[RunReport]]:
    """The package-writing cell, the importing cell, and its run, once the import sleeps halfway."""
    writer = await manager.create_cell(sid, WRITE_PACKAGE.format(tag=sid, delay=60))
    importer = await manager.create_cell(sid, IMPORT_PACKAGE)
    task = asyncio.ensure_future(manager.run_cell(sid, importer.id))
    await until(importing(manager, sid), "the import to sleep")
    return writer, importer, task


async def test_an_interrupt_inside_an_import_restarts_the_kernel_and_the_next_run_imports_cleanly(
        manager: NotebookManager, sid: str) -> None:
    writer, importer, task = await start_slow_import(manager, sid)
    kernel = manager.kernel(sid)
    assert kernel is not None
    generation = kernel.generation
    assert await manager.interrupt(sid, importer.id) is True
    report = await task
    error = report.cell["outputs"][-1]
    assert report.status == "error" and error["interrupted"] is True
    assert "'slowpkg' was being imported" in error["evalue"] and "restarted" in error["evalue"], error
    assert report.cell["interrupted"] is True
    state = await cells(manager, sid)
    assert state[writer.id]["previous_kernel"] is True and state[writer.id]["stale"] is True
    # The user makes the import quick and runs the cell again: the package is imported whole,
    # in a fresh kernel (in the old one, `fast` would still point at the half-made package).
    await manager.update_cell(sid, writer.id, WRITE_PACKAGE.format(tag=sid, delay=0), by="user")
    await manager.update_cell(sid, importer.id, IMPORT_PACKAGE + "\n", by="user")
    report = await manager.run_cell(sid, importer.id)
    assert report.ran_upstream == [writer.id]
    assert report.status == "success", report.cell["outputs"]
    assert report.cell["outputs"] == [{"type": "text", "text": "'ready'"}]
    assert kernel.generation > generation


async def test_the_tool_result_of_an_interrupted_import_names_the_restart(manager: NotebookManager,
                                                                         sid: str) -> None:
    from turnstream.toolsets.notebook import run_result

    _, importer, task = await start_slow_import(manager, sid)
    await manager.interrupt(sid, importer.id)
    result = run_result(await task)
    assert "half-imported" in result["outputs"][-1]["error"]
    assert "kernel was restarted" in result["outputs"][-1]["error"]


async def test_a_dependent_never_reruns_an_interrupted_loop(manager: NotebookManager, sid: str) -> None:
    first = await manager.create_cell(sid, "a = 1")
    loop = await manager.create_cell(sid, "n = 0\nwhile True:\n    n += 1")
    uses = await manager.create_cell(sid, "a + n")
    await manager.run_cell(sid, first.id)
    task = asyncio.ensure_future(manager.run_cell(sid, loop.id))
    await until(status_is(manager, sid, loop.id, "running"), "the loop to run")
    kernel = manager.kernel(sid)
    assert kernel is not None
    generation = kernel.generation
    assert await manager.interrupt(sid, loop.id) is True
    assert (await task).cell["interrupted"] is True
    started = time.monotonic()
    report = await manager.run_cell(sid, uses.id)
    assert time.monotonic() - started < 1.0  # it stops at once: the loop did not run again
    assert report.started == [] and report.waits_on == loop.id
    state = await cells(manager, sid)
    assert state[uses.id]["status"] == "blocked" and state[uses.id]["blocked_by"] == loop.id
    assert state[first.id]["status"] == "success" and state[first.id]["previous_kernel"] is False
    assert kernel.generation == generation  # nothing was restarted: `a` is still there
    # Editing the loop lifts the stop: it is an upstream cell like any other again.
    await manager.update_cell(sid, loop.id, "n = 5", by="user")
    report = await manager.run_cell(sid, uses.id)
    assert report.ran_upstream == [loop.id]
    assert report.cell["outputs"] == [{"type": "text", "text": "6"}]


async def test_a_loop_that_timed_out_is_not_rerun_either_and_earlier_cells_show_the_lost_kernel(
        manager: NotebookManager, sid: str) -> None:
    first = await manager.create_cell(sid, "a = 1")
    loop = await manager.create_cell(sid, "n = 0\nwhile True:\n    n += 1")
    uses = await manager.create_cell(sid, "a + n")
    await manager.run_cell(sid, first.id)
    report = await manager.run_cell(sid, loop.id)  # the 3 s time limit: the kernel is restarted
    assert report.cell["outputs"][-1]["timed_out"] is True and report.cell["interrupted"] is True
    state = await cells(manager, sid)
    assert state[first.id]["previous_kernel"] is True and state[first.id]["stale"] is True
    report = await manager.run_cell(sid, uses.id)
    assert report.started == [] and report.waits_on == loop.id


async def test_the_dependent_shows_waiting_for_the_upstream_cell_that_runs(manager: NotebookManager,
                                                                          sid: str) -> None:
    slow = await manager.create_cell(sid, "import time\ntime.sleep(1.5)\nx = 2")
    uses = await manager.create_cell(sid, "x * 21")
    seen: list[tuple[str, str | None]] = []

    async def watch() -> None:
        while True:
            cell = (await manager.notebook(sid)).cell(uses.id)
            if not seen or seen[-1] != (cell.status, cell.blocked_by):
                seen.append((cell.status, cell.blocked_by))
            await asyncio.sleep(0.01)  # sampling the state while the run goes on

    watcher = asyncio.ensure_future(watch())
    try:
        report = await manager.run_cell(sid, uses.id)
    finally:
        watcher.cancel()
    assert report.cell["outputs"] == [{"type": "text", "text": "42"}]
    assert ("waiting", slow.id) in seen and ("idle", None) not in seen[1:], seen


async def test_a_blocked_cell_never_names_a_deleted_one(manager: NotebookManager, sid: str) -> None:
    bad = await manager.create_cell(sid, "x = 1 / 0")
    uses = await manager.create_cell(sid, "x + 1")
    await manager.run_cell(sid, uses.id)
    assert (await manager.notebook(sid)).cell(uses.id).blocked_by == bad.id
    await manager.delete_cell(sid, bad.id)
    cell = (await manager.notebook(sid)).cell(uses.id)
    assert (cell.status, cell.blocked_by) == ("idle", None)


async def test_restart_marks_what_ran_and_restart_and_run_all_runs_every_cell(manager: NotebookManager,
                                                                             sid: str) -> None:
    first = await manager.create_cell(sid, "a = 20")
    second = await manager.create_cell(sid, "b = a + 1")
    never = await manager.create_cell(sid, "b * 2")
    await manager.run_cell(sid, second.id)
    assert await manager.restart(sid) == []
    state = await cells(manager, sid)
    assert [state[c.id]["previous_kernel"] for c in (first, second, never)] == [True, True, False]
    assert all(state[c.id]["stale"] for c in (first, second, never))
    probe = await manager.create_cell(sid, "'a' in dir()")
    assert (await manager.run_cell(sid, probe.id)).cell["outputs"] == [{"type": "text", "text": "False"}]
    await manager.delete_cell(sid, probe.id)
    reports = await manager.restart(sid, run_all=True)
    assert [r.cell["id"] for r in reports] == [first.id, second.id, never.id]
    assert reports[-1].cell["outputs"] == [{"type": "text", "text": "42"}]
    state = await cells(manager, sid)
    assert not any(c["previous_kernel"] or c["stale"] for c in state.values())


async def test_restart_interrupts_a_run_under_way(manager: NotebookManager, sid: str) -> None:
    slow = await manager.create_cell(sid, "import time\ntime.sleep(60)")
    task = asyncio.ensure_future(manager.run_cell(sid, slow.id))
    await until(status_is(manager, sid, slow.id, "running"), "the cell to run")
    await manager.restart(sid)
    report = await task
    assert report.status == "error"
    assert "Interrupted because the kernel was restarted" in report.cell["outputs"][-1]["evalue"]
    assert (await cells(manager, sid))[slow.id]["previous_kernel"] is True


async def test_the_restart_kernel_tool_restarts_and_runs_all_for_the_assistant(manager: NotebookManager,
                                                                              sid: str) -> None:
    import json

    from turnstream.blocks import ToolUseBlock
    from turnstream.tools.executor import Outcome, ToolExecutor
    from turnstream.toolsets.notebook import NOTEBOOK_TOOLS

    first = await manager.create_cell(sid, "a = 40")
    second = await manager.create_cell(sid, "a + 2")
    await manager.run_cell(sid, second.id)
    kernel = manager.kernel(sid)
    assert kernel is not None
    generation = kernel.generation
    executor = ToolExecutor({t.name: t for t in NOTEBOOK_TOOLS}, deps={"notebooks": manager})
    call = ToolUseBlock(tool_use_id="call-restart", name="restart_kernel", input={"run_all": True})
    outcome: Outcome = await executor.decide(call)
    await executor.run([outcome], session_id=sid, turn_id="turn-1")
    result = json.loads(outcome.content)
    assert result["restarted"] is True
    assert [r["cell_id"] for r in result["ran"]] == [first.id, second.id]
    assert result["ran"][1]["outputs"] == [{"type": "text", "text": "42"}]
    assert kernel.generation > generation


async def call_tool(manager: NotebookManager, sid: str, name: str, **args: object) -> dict[str, Any]:
    """One call of a notebook tool as the assistant makes it; what the model reads back."""
    import json

    from turnstream.blocks import ToolUseBlock
    from turnstream.tools.executor import ToolExecutor
    from turnstream.toolsets.notebook import NOTEBOOK_TOOLS

    executor = ToolExecutor({t.name: t for t in NOTEBOOK_TOOLS}, deps={"notebooks": manager})
    outcome = await executor.decide(ToolUseBlock(tool_use_id=f"call-{name}", name=name, input=dict(args)))
    await executor.run([outcome], session_id=sid, turn_id="turn-1")
    result = json.loads(outcome.content)
    assert isinstance(result, dict), outcome.content
    return result


async def test_stopping_the_turn_inside_an_import_restarts_the_kernel_too(manager: NotebookManager,
                                                                          sid: str) -> None:
    """N1 as the user met it: Stop cancels the turn, so the run_cell call importing the module is
    cancelled (not interrupted from the cell): the kernel is restarted all the same."""
    writer, importer, task = await start_slow_import(manager, sid)
    kernel = manager.kernel(sid)
    assert kernel is not None
    generation = kernel.generation
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cell = (await manager.notebook(sid)).cell(importer.id)
    error: dict[str, Any] = dict(cell.outputs[-1])
    assert cell.status == "error" and error["interrupted"] is True, cell.outputs
    assert error["evalue"].startswith("Interrupted because the run's caller was cancelled"), error
    assert "'slowpkg' was being imported" in error["evalue"] and "kernel was restarted" in error["evalue"], error
    await manager.update_cell(sid, writer.id, WRITE_PACKAGE.format(tag=sid, delay=0), by="user")
    await manager.update_cell(sid, importer.id, IMPORT_PACKAGE + "\n", by="user")
    report = await manager.run_cell(sid, importer.id)
    assert report.cell["outputs"] == [{"type": "text", "text": "'ready'"}], report.cell["outputs"]
    assert kernel.generation > generation


async def test_a_kernel_that_dies_marks_what_ran_before_as_from_the_previous_kernel(manager: NotebookManager,
                                                                                   sid: str) -> None:
    """Build 1: after a crash too, what ran before shows as from the previous kernel, never as a
    success of the current one; the assistant reads the same."""
    first = await manager.create_cell(sid, "a = 1")
    dies = await manager.create_cell(sid, "import os\nos._exit(3)")
    await manager.run_cell(sid, first.id)
    report = await manager.run_cell(sid, dies.id)
    assert report.cell["outputs"][-1]["ename"] == "KernelDied"
    state = await cells(manager, sid)
    assert (state[first.id]["status"], state[first.id]["previous_kernel"], state[first.id]["stale"]) == (
        "success", True, True)
    assert state[dies.id]["previous_kernel"] is False  # its own error is of the kernel that died with it
    seen = {c["id"]: c for c in (await call_tool(manager, sid, "get_notebook_state"))["cells"]}
    assert seen[first.id].get("previous_kernel") is True and seen[first.id]["stale"] is True
    assert "previous_kernel" not in seen[dies.id]


async def test_a_kernel_the_pool_stopped_for_idling_shows_what_ran_as_from_the_previous_kernel(
        manager: NotebookManager, sid: str) -> None:
    """Build 1, a kernel stopped when idle: once anyone reads the notebook (the page, the
    assistant), what ran in it shows as from the previous kernel, and the page is told."""
    first = await manager.create_cell(sid, "a = 1")
    await manager.run_cell(sid, first.id)
    kernel = manager.kernel(sid)
    assert kernel is not None and kernel.alive
    manager.pool._slots[kernel].last_used -= 10**6  # idle for long past any timeout
    timeout, manager.pool.idle_timeout = manager.pool.idle_timeout, 60.0
    try:
        assert manager.pool.stop_idle() == 1
    finally:
        manager.pool.idle_timeout = timeout
    assert not kernel.alive
    state = await cells(manager, sid)
    assert (state[first.id]["status"], state[first.id]["previous_kernel"], state[first.id]["stale"]) == (
        "success", True, True)
    seen = {c["id"]: c for c in (await call_tool(manager, sid, "get_notebook_state"))["cells"]}
    assert seen[first.id].get("previous_kernel") is True


async def test_the_page_is_told_at_once_when_the_pool_stops_an_idle_kernel(sid: str) -> None:
    """The pool's idle stop (its reaper thread) tells the page, with nobody reading the notebook:
    what ran shows as from the previous kernel without waiting for a reload or a run."""
    said: list[dict[str, Any]] = []

    async def listen(session_id: str, message: dict[str, Any]) -> None:
        said.append(message)

    m = NotebookManager(InMemoryNotebooks(), listen, limits=KernelLimits(time_limit=3.0, interrupt_grace=1.0))
    try:
        first = await m.create_cell(sid, "a = 1")
        await m.run_cell(sid, first.id)
        kernel = m.kernel(sid)
        assert kernel is not None and kernel.alive
        m.pool._slots[kernel].last_used -= 10**6
        m.pool.idle_timeout = 60.0
        del said[:]
        await asyncio.to_thread(m.pool.stop_idle)  # as the reaper thread calls it

        async def told() -> bool:
            return any(x.get("change") == "cell_status" and x["cell"]["id"] == first.id
                       and x["cell"].get("previous_kernel") for x in said)

        await until(told, "the page to be told the kernel stopped")
        assert (await m.notebook(sid)).cell(first.id).previous_kernel
    finally:
        await m.aclose()


async def test_the_assistant_reads_that_a_cell_waits_on_an_interrupted_one(manager: NotebookManager,
                                                                          sid: str) -> None:
    """Build 3, the tool result: run_cell on a dependent of an interrupted loop says it was not
    run and why, and the notebook's state marks the loop interrupted."""
    loop = await manager.create_cell(sid, "n = 0\nwhile True:\n    n += 1")
    uses = await manager.create_cell(sid, "n + 1")
    task = asyncio.ensure_future(manager.run_cell(sid, loop.id))
    await until(status_is(manager, sid, loop.id, "running"), "the loop to run")
    assert await manager.interrupt(sid, loop.id) is True
    await task
    said = await call_tool(manager, sid, "run_cell", cell_id=uses.id)
    assert (said["status"], said["blocked_by"], said["ran_upstream"]) == ("blocked", loop.id, [])
    assert str(said["note"]).startswith(f"Not run: Waits on #{loop.id}, which was interrupted: run or edit it.")
    assert "not run again by itself" in str(said["note"])
    seen = {c["id"]: c for c in (await call_tool(manager, sid, "get_notebook_state"))["cells"]}
    assert seen[loop.id].get("interrupted") is True
    assert (seen[uses.id]["status"], seen[uses.id].get("blocked_by")) == ("blocked", loop.id)
