"""NotebookManager over real kernels: upstream re-runs, blocked cells, limits, persistence, events."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from turnstream.notebook import InMemoryNotebooks, KernelLimits, NotebookManager, UnknownCellError

pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count()


class Recorder:
    """Persistence and listener in one: keeps documents and every event per session."""

    def __init__(self) -> None:
        self.store = InMemoryNotebooks()
        self.events: dict[str, list[dict[str, Any]]] = defaultdict(list)

    async def on_change(self, session_id: str, event: dict[str, Any]) -> None:
        self.events[session_id].append(event)


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def manager(recorder: Recorder) -> AsyncIterator[NotebookManager]:
    m = NotebookManager(recorder.store, recorder.on_change)
    yield m
    await m.aclose()


@pytest.fixture
def sid() -> str:
    return f"session-{next(_ids)}"


async def statuses(manager: NotebookManager, sid: str) -> dict[str, tuple[str, bool]]:
    state = await manager.state(sid)
    return {c["id"]: (c["status"], c["stale"]) for c in state["cells"]}


async def test_running_a_cell_runs_its_stale_upstream_first(manager: NotebookManager, sid: str) -> None:
    a = await manager.create_cell(sid, "x = 2")
    b = await manager.create_cell(sid, "y = x * 10")
    c = await manager.create_cell(sid, "print(y + 1)\ny")
    other = await manager.create_cell(sid, "unrelated = 1", after_cell_id=a.id)

    report = await manager.run_cell(sid, c.id)
    assert report.status == "success"
    assert report.ran_upstream == [a.id, b.id]  # the unrelated cell stays untouched
    assert report.cell["outputs"] == [{"type": "stdout", "text": "21\n"}, {"type": "text", "text": "20"}]
    assert (await statuses(manager, sid))[other.id] == ("idle", True)

    again = await manager.run_cell(sid, c.id)  # nothing upstream is stale now
    assert again.ran_upstream == []

    await manager.update_cell(sid, a.id, "x = 3")
    st = await statuses(manager, sid)
    assert st[a.id] == ("success", True) and st[b.id][1] and st[c.id][1]
    report = await manager.run_cell(sid, c.id)
    assert report.ran_upstream == [a.id, b.id]
    assert report.cell["outputs"][-1] == {"type": "text", "text": "30"}

    await manager.run_cell(sid, a.id)  # an upstream re-ran: b and c are stale again
    st = await statuses(manager, sid)
    assert st[a.id] == ("success", False) and st[b.id] == ("success", True)
    assert (await manager.run_cell(sid, c.id)).ran_upstream == [b.id]


async def test_a_failed_upstream_blocks_the_cells_below(manager: NotebookManager, sid: str) -> None:
    a = await manager.create_cell(sid, "base = undefined_name + 1")
    b = await manager.create_cell(sid, "mid = base * 2")
    c = await manager.create_cell(sid, "mid + 1")

    report = await manager.run_cell(sid, c.id)
    assert report.ran_upstream == [a.id]
    assert report.blocked == [b.id, c.id]
    assert report.cell["status"] == "blocked" and report.cell["blocked_by"] == a.id
    st = await statuses(manager, sid)
    assert st[a.id][0] == "error" and st[b.id][0] == "blocked"
    nb = await manager.notebook(sid)
    err = nb.cell(a.id).outputs[-1]
    assert err["type"] == "error" and err["ename"] == "NameError"

    await manager.update_cell(sid, a.id, "base = 1")
    report = await manager.run_cell(sid, c.id)
    assert report.status == "success" and report.ran_upstream == [a.id, b.id]
    assert report.cell["outputs"] == [{"type": "text", "text": "3"}]
    assert report.cell["blocked_by"] is None


async def test_sql_cells_read_python_frames_and_name_their_result(manager: NotebookManager, sid: str) -> None:
    frame = await manager.create_cell(
        sid, "import pandas as pd\nsales = pd.DataFrame({'region': ['n', 's', 'n'], 'amount': [5, 7, 1]})\n"
             "region = \"n' OR '1'='1\"")
    query = await manager.create_cell(
        sid, "-- name: totals\nSELECT region, sum(amount) AS total FROM sales "
             "WHERE region = {{region}} GROUP BY region", "sql")
    use = await manager.create_cell(sid, "len(totals)")
    state = await manager.state(sid)
    assert state["cells"][1]["depends_on"] == [frame.id]
    assert state["cells"][2]["depends_on"] == [query.id]

    report = await manager.run_cell(sid, use.id)
    assert report.ran_upstream == [frame.id, query.id]
    assert report.cell["outputs"] == [{"type": "text", "text": "0"}]  # the quote trick matched nothing

    await manager.update_cell(sid, frame.id, (await manager.notebook(sid)).cell(frame.id).code
                              .replace("\"n' OR '1'='1\"", "'n'"))
    report = await manager.run_cell(sid, query.id)
    table = report.cell["outputs"][-1]
    assert table["type"] == "table" and table["rows"] == 1 and "6" in table["text"]


async def test_unknown_cells_and_languages_are_value_errors(manager: NotebookManager, sid: str) -> None:
    await manager.create_cell(sid, "1")
    for call in (manager.run_cell(sid, "nope"), manager.update_cell(sid, "nope", "2"),
                 manager.delete_cell(sid, "nope"), manager.create_cell(sid, "2", after_cell_id="nope")):
        with pytest.raises(UnknownCellError, match="No cell with id 'nope'"):
            await call
    with pytest.raises(ValueError, match="language must be one of"):
        await manager.create_cell(sid, "x", "ruby")  # type: ignore[arg-type]


async def test_every_change_is_saved_and_announced(recorder: Recorder, manager: NotebookManager,
                                                   sid: str) -> None:
    a = await manager.create_cell(sid, "v = 1")
    b = await manager.create_cell(sid, "v + 1", after_cell_id=a.id)
    await manager.update_cell(sid, b.id, "v + 2")
    await manager.run_cell(sid, b.id)
    await manager.delete_cell(sid, a.id)

    events = recorder.events[sid]
    assert [(e["change"], e["cell"]["id"]) for e in events] == [
        ("cell_created", a.id), ("cell_created", b.id), ("cell_updated", b.id),
        ("cell_status", b.id),  # waiting for a
        ("cell_status", a.id), ("cell_output", a.id), ("cell_status", b.id), ("cell_output", b.id),
        ("cell_deleted", a.id),
    ]
    assert [e["version"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["type"] == "notebook" and e["session_id"] == sid for e in events)
    assert events[1]["index"] == 1
    assert (events[3]["cell"]["status"], events[3]["cell"]["blocked_by"]) == ("waiting", a.id)
    assert events[6]["cell"]["status"] == "running"
    assert events[7]["cell"]["status"] == "success"
    assert events[7]["cell"]["outputs"] == [{"type": "text", "text": "3"}]
    assert events[-1]["cell"] == {"id": a.id}

    doc = recorder.store.load_notebook(sid)
    assert doc is not None and doc["version"] == len(events)
    assert [c["id"] for c in doc["cells"]] == [b.id]

    state = await manager.state(sid)
    assert state["type"] == "notebook_state" and state["version"] == len(events)


async def test_a_new_manager_loads_the_saved_notebook_with_everything_stale(recorder: Recorder,
                                                                            manager: NotebookManager,
                                                                            sid: str) -> None:
    a = await manager.create_cell(sid, "n = 5")
    b = await manager.create_cell(sid, "n * 2")
    await manager.run_cell(sid, b.id)

    fresh = NotebookManager(recorder.store)
    try:
        state = await fresh.state(sid)
        assert [(c["id"], c["status"], c["stale"]) for c in state["cells"]] == [
            (a.id, "success", True), (b.id, "success", True)]
        assert state["cells"][1]["outputs"] == [{"type": "text", "text": "10"}]
        report = await fresh.run_cell(sid, b.id)  # a new kernel: a must run again first
        assert report.ran_upstream == [a.id]
        assert report.cell["execution_count"] == 4
    finally:
        await fresh.aclose()


async def test_a_timed_out_cell_restarts_the_kernel_and_upstream_runs_again(sid: str) -> None:
    manager = NotebookManager(limits=KernelLimits(time_limit=0.5))
    try:
        a = await manager.create_cell(sid, "seed = 4")
        slow = await manager.create_cell(sid, "while seed:\n    pass")
        after = await manager.create_cell(sid, "seed + 1")
        await manager.run_cell(sid, a.id)

        report = await manager.run_cell(sid, slow.id)
        assert report.status == "error"
        err = report.cell["outputs"][0]
        assert err["ename"] == "TimeoutError" and err["timed_out"] is True
        st = await statuses(manager, sid)
        assert st[a.id] == ("success", True)  # its variables died with the kernel

        report = await manager.run_cell(sid, after.id)
        assert report.ran_upstream == [a.id]
        assert report.cell["outputs"] == [{"type": "text", "text": "5"}]
    finally:
        await manager.aclose()
