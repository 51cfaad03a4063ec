"""One notebook, two server processes (two managers on one store, each with its own runner id
and kernel): a save made on top of a version another process replaced meanwhile merges both
changes instead of overwriting the other's (issue 13, point 6)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from turnstream.notebook import InMemoryNotebooks, NotebookManager

RUNNERS = ("run_a", "run_b")


class Process(InMemoryNotebooks):
    """One process's view of a shared store: the same documents, its own runner id."""

    def __init__(self, shared: InMemoryNotebooks, runner_id: str) -> None:
        super().__init__()
        self.docs, self.versions, self.runner_id = shared.docs, shared.versions, runner_id

    async def runner_alive(self, runner_id: str) -> bool:
        return runner_id in RUNNERS


async def test_an_edit_made_while_another_process_runs_a_cell_survives_that_runs_save() -> None:
    shared = InMemoryNotebooks()
    running = asyncio.Event()

    async def b_changed(session_id: str, message: dict[str, Any]) -> None:
        if (message.get("cell") or {}).get("status") == "running":
            running.set()

    a = NotebookManager(Process(shared, "run_a"))
    b = NotebookManager(Process(shared, "run_b"), b_changed)
    try:
        first = await a.create_cell("s", "x = 1")
        spin = await a.create_cell("s", "while True:\n    pass")
        run = asyncio.create_task(b.run_cell("s", spin.id, timeout=120))
        async with asyncio.timeout(60):
            await running.wait()  # b saved the cell as running and holds its notebook for the run
        edited = await a.update_cell("s", first.id, "x = 2", by="user")  # a saves on top of b's save
        added = await a.create_cell("s", "y = x + 1")
        assert await b.interrupt("s", spin.id)
        await run  # b's save of the ended run finds a's versions in the store and merges

        saved = json.loads(shared.docs["s"])
        cells = {c["id"]: c for c in saved["cells"]}
        assert [c["id"] for c in saved["cells"]] == [first.id, spin.id, added.id]
        assert (cells[first.id]["code"], cells[first.id]["edited_by"]) == ("x = 2", "user") == (
            edited.code, edited.edited_by)
        assert cells[spin.id]["status"] == "error" and cells[spin.id]["outputs"][-1]["interrupted"] is True
        assert saved["runners"] == {}
        assert saved["version"] == shared.versions["s"]
        # Both processes now hold the merged notebook.
        for m in (a, b):
            nb = await m.notebook("s")
            assert [(c.id, c.code, c.status) for c in nb.cells] == [(first.id, "x = 2", "idle"),
                                                                    (spin.id, "while True:\n    pass", "error"),
                                                                    (added.id, "y = x + 1", "idle")]
    finally:
        await a.aclose()
        await b.aclose()
