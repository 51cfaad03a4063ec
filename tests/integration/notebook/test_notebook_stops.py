"""No cell stays ``running`` after its run ended, by any path: an interrupt, a cancelled caller
(before and after the cell started), the time limit, the kernel's death, a process that died
with the cell running. Also: data files reach the kernel and are read again when they change,
and the assistant learns when it replaced code the user wrote after it last looked."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from turnstream.blocks import ToolUseBlock
from turnstream.notebook import InMemoryNotebooks, KernelLimits, NotebookManager
from turnstream.notebook.manager import DEAD_RUN
from turnstream.tools.executor import ToolExecutor
from turnstream.toolsets.notebook import NOTEBOOK_TOOLS

pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count()
CSV = b"region,units\nNorth,3\nSouth,5\n"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def manager() -> AsyncIterator[NotebookManager]:
    m = NotebookManager(InMemoryNotebooks(), limits=KernelLimits(time_limit=3.0, interrupt_grace=0.5))
    yield m
    await m.aclose()


@pytest.fixture
def sid() -> str:
    return f"stops-{next(_ids)}"


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)  # polling the manager's state with a deadline


async def status_of(manager: NotebookManager, sid: str, cell_id: str) -> str:
    return str((await manager.notebook(sid)).cell(cell_id).status)


async def running(manager: NotebookManager, sid: str, cell_id: str) -> bool:
    return await status_of(manager, sid, cell_id) == "running"


async def test_the_time_limit_and_a_dying_kernel_end_the_cell(manager: NotebookManager, sid: str) -> None:
    spin = await manager.create_cell(sid, "while True:\n    pass")
    report = await manager.run_cell(sid, spin.id)
    assert report.status == "error" and report.cell["outputs"][-1]["timed_out"] is True
    dies = await manager.create_cell(sid, "import os\nos._exit(3)")
    report = await manager.run_cell(sid, dies.id)
    assert report.status == "error" and report.cell["outputs"][-1]["ename"] == "KernelDied"
    assert [c["status"] for c in (await manager.state(sid))["cells"]] == ["error", "error"]


async def test_interrupt_ends_the_cell_and_keeps_the_namespace(manager: NotebookManager, sid: str) -> None:
    keep = await manager.create_cell(sid, "kept = 7")
    await manager.run_cell(sid, keep.id)
    slow = await manager.create_cell(sid, "import time\ntime.sleep(60)")
    task = asyncio.ensure_future(manager.run_cell(sid, slow.id))
    await until(lambda: running(manager, sid, slow.id), "the cell to run")
    assert await manager.interrupt(sid, slow.id) is True
    report = await task
    assert report.status == "error" and report.interrupted == slow.id
    assert "Interrupted by the user" in report.cell["outputs"][-1]["evalue"]
    assert await manager.interrupt(sid, slow.id) is False  # nothing runs now
    check = await manager.create_cell(sid, "kept * 6")
    assert (await manager.run_cell(sid, check.id)).cell["outputs"] == [{"type": "text", "text": "42"}]


async def test_interrupting_the_target_stops_the_upstream_cell_it_waits_for(manager: NotebookManager,
                                                                           sid: str) -> None:
    up = await manager.create_cell(sid, "import time\ntime.sleep(60)\nx = 1")
    down = await manager.create_cell(sid, "x + 1")
    task = asyncio.ensure_future(manager.run_cell(sid, down.id))
    await until(lambda: running(manager, sid, up.id), "the upstream cell to run")
    assert await manager.interrupt(sid, down.id) is True
    report = await task
    assert report.blocked == [down.id]
    assert [await status_of(manager, sid, c) for c in (up.id, down.id)] == ["error", "blocked"]


class Caller:
    def __init__(self, manager: NotebookManager, session_id: str) -> None:
        self.executor = ToolExecutor({t.name: t for t in NOTEBOOK_TOOLS}, deps={"notebooks": manager})
        self.session_id = session_id

    async def run(self, name: str, call_id: str, **args: Any) -> str:
        from turnstream.tools.executor import Outcome

        call = ToolUseBlock(tool_use_id=call_id, name=name, input=args)
        outcome: Outcome = await self.executor.decide(call)
        await self.executor.run([outcome], session_id=self.session_id, turn_id="turn-1")
        return outcome.content


async def test_a_cancelled_run_cell_interrupts_its_cell_and_says_it_had_started(manager: NotebookManager,
                                                                               sid: str) -> None:
    caller = Caller(manager, sid)
    cell = await manager.create_cell(sid, "import time\nprint('on')\ntime.sleep(60)")
    task = asyncio.ensure_future(caller.run("run_cell", "call-a", cell_id=cell.id))
    await until(lambda: running(manager, sid, cell.id), "the cell to run")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await status_of(manager, sid, cell.id) == "error"
    note = caller.executor.cancel_notes["call-a"]
    assert note.startswith(f"Cell {cell.id} started running and was interrupted")
    assert "KeyboardInterrupt" in note


async def test_a_run_cell_cancelled_before_its_cell_started_says_so(manager: NotebookManager, sid: str) -> None:
    caller = Caller(manager, sid)
    busy = await manager.create_cell(sid, "import time\ntime.sleep(60)")
    waiting = await manager.create_cell(sid, "1 + 1")
    first = asyncio.ensure_future(manager.run_cell(sid, busy.id))
    await until(lambda: running(manager, sid, busy.id), "the first cell to run")
    queued = asyncio.ensure_future(caller.run("run_cell", "call-b", cell_id=waiting.id))
    lock = manager._entries[sid].run_lock

    async def queued_on_the_lock() -> bool:
        return bool(getattr(lock, "_waiters", None))  # asyncio.Lock keeps its waiters here

    await until(queued_on_the_lock, "the second run to wait for the first")
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert caller.executor.cancel_notes["call-b"] == f"Not run: this call was stopped before cell {waiting.id} started."
    assert await status_of(manager, sid, waiting.id) == "idle"
    await manager.interrupt(sid)
    await first
    assert [c["status"] for c in (await manager.state(sid))["cells"]] == ["error", "idle"]


async def test_a_cell_left_running_by_a_dead_process_shows_as_interrupted() -> None:
    store = InMemoryNotebooks()
    doc = {"cells": [{"id": "c1", "code": "slow()", "status": "running", "outputs": []},
                     {"id": "c2", "code": "other()", "status": "running", "outputs": []}],
           "runners": {"c1": "run_dead", "c2": "run_alive"}}
    store.save_notebook("s", doc)

    class Liveness(InMemoryNotebooks):
        runner_id = "run_me"

        async def runner_alive(self, runner_id: str) -> bool:
            return runner_id == "run_alive"

    live = Liveness()
    live.docs, live.versions = store.docs, store.versions
    events: list[dict[str, Any]] = []

    async def on_change(session_id: str, message: dict[str, Any]) -> None:
        events.append(message)

    m = NotebookManager(live, on_change)
    try:
        state = await m.state("s")
        assert [c["status"] for c in state["cells"]] == ["error", "running"]  # c2's process still runs it
        out = state["cells"][0]["outputs"][-1]
        assert out["interrupted"] is True and out["evalue"] == DEAD_RUN
        assert [(e["change"], e["cell"]["id"]) for e in events] == [("cell_output", "c1")]
        saved = json.loads(live.docs["s"])
        assert saved["cells"][0]["status"] == "error" and saved["runners"] == {"c2": "run_alive"}
    finally:
        await m.aclose()
    alone = NotebookManager(InMemoryNotebooks())  # no liveness to ask: nothing else can be running it
    try:
        alone.persistence.docs, alone.persistence.versions = dict(store.docs), dict(store.versions)  # type: ignore[union-attr]
        assert [c["status"] for c in (await alone.state("s"))["cells"]] == ["error", "error"]
    finally:
        await alone.aclose()


async def test_data_files_are_loaded_on_use_and_again_when_they_change(manager: NotebookManager, sid: str) -> None:
    await manager.add_files(sid, [("sales.csv", CSV)])
    total = await manager.create_cell(sid, "int(sales.units.sum())")
    assert (await manager.run_cell(sid, total.id)).cell["outputs"] == [{"type": "text", "text": "8"}]
    assert (await manager.state(sid))["cells"][0]["stale"] is False
    await manager.add_files(sid, [("sales.csv", CSV + b"East,10\n")])
    assert (await manager.state(sid))["cells"][0]["stale"] is True  # its file changed
    assert (await manager.run_cell(sid, total.id)).cell["outputs"] == [{"type": "text", "text": "18"}]
    shadow = await manager.create_cell(sid, "sales = 'mine'")
    user = await manager.create_cell(sid, "sales")
    report = await manager.run_cell(sid, user.id)  # a cell above defines the name: no file is read
    assert report.cell["outputs"] == [{"type": "text", "text": "'mine'"}] and report.ran_upstream == [shadow.id]


async def test_the_assistant_learns_when_it_replaces_code_it_never_read(manager: NotebookManager, sid: str) -> None:
    caller = Caller(manager, sid)
    cell = await manager.create_cell(sid, "a = 1", by="user")
    said = json.loads(await caller.run("update_cell", "u1", cell_id=cell.id, code="a = 2"))
    assert said["replaced_code"] == "a = 1"  # the user's cell, never read by the assistant
    await manager.update_cell(sid, cell.id, "a = 3", by="user")
    await caller.run("get_notebook_state", "g1")
    said = json.loads(await caller.run("update_cell", "u2", cell_id=cell.id, code="a = 4"))
    assert "replaced_code" not in said  # it read the user's version first
    said = json.loads(await caller.run("update_cell", "u3", cell_id=cell.id, code="a = 5"))
    assert "replaced_code" not in said  # its own code


async def test_a_kernel_lost_mid_chain_gets_the_data_files_again(manager: NotebookManager, sid: str) -> None:
    await manager.add_files(sid, [("sales.csv", CSV)])
    a = await manager.create_cell(sid, "a = 1\nimport os\nos._exit(1)")
    b = await manager.create_cell(sid, "b = int(sales.units.sum())\nb")
    c = await manager.create_cell(sid, "a + b")
    report = await manager.run_cell(sid, c.id)
    assert report.ran_upstream == [a.id, b.id] and report.blocked == [c.id]
    nb = await manager.notebook(sid)
    assert nb.cell(a.id).outputs[-1]["ename"] == "KernelDied"
    assert nb.cell(b.id).status == "success" and nb.cell(b.id).outputs == [{"type": "text", "text": "8"}]
