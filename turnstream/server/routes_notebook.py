"""The notebook of a session over HTTP: read it, edit cells, run and interrupt them, restart its kernel.

Every route goes through the process's ``NotebookManager``, as the assistant's tools do, so a
user's edit is saved, broadcast to every open tab (``ws.py``) and seen by the assistant's next
``get_notebook_state``. Edits are the user's (``edited_by: "user"``); an edit that sends
``base_code`` is refused with 409 and the current cell when the code changed meanwhile
(docs/notebook.md). Data files: ``routes_notebook_files.py``; ``.ipynb``: ``routes_ipynb.py``.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from ..errors import ApiError, UnknownCellError
from ..notebook import NotebookManager
from ..notebook.running import waits_on_note
from ..toolsets.notebook import RUN_TIMEOUT
from .api import API, Call, Reply
from .auth import owned_session
from .errors import not_found
from .models import (
    CellCreate,
    CellOut,
    CellPatch,
    Deleted,
    EditConflictOut,
    InterruptOut,
    NotebookOut,
    RestartBody,
    RestartOut,
    RunOut,
)

BASE = "/api/sessions/{session_id}/notebook"
CELL = BASE + "/cells/{cell_id}"
NO_CELL = Reply("No such session or cell (or not yours).")


def notebooks(call: Call) -> NotebookManager:
    manager = call.state.notebooks
    if manager is None:
        raise ApiError(503, "notebook_unavailable", "notebooks are not available on this server "
                                                    "(install turnstream[notebook])")
    return manager


async def session_notebook(call: Call) -> tuple[NotebookManager, str]:
    """The manager and the caller's session id; 404 for a session that is not the caller's."""
    manager = notebooks(call)
    session = await owned_session(call.state.store, call.user, call.param("session_id"))
    return manager, session.id


def unknown_cell(cell_id: str) -> ApiError:
    return not_found(f"cell {cell_id}")


def notebook_json(state: dict[str, Any]) -> dict[str, Any]:
    return {k: state[k] for k in ("session_id", "version", "cells", "files", "sandbox")}


@API.route("GET", BASE, summary="The session's notebook: its cells in order, with outputs, and its data files",
           replies={200: Reply("The notebook.", NotebookOut)})
async def get_notebook(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    return JSONResponse(notebook_json(await manager.state(sid)))


@API.route("POST", BASE + "/cells", summary="Add a cell (it does not run)", body=CellCreate,
           replies={201: Reply("The new cell.", CellOut)})
async def create_cell(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    body = call.parsed(CellCreate)
    cell = await manager.create_cell(sid, body.code, body.language, index=body.index, by="user")
    return JSONResponse(cell.to_dict(), status_code=201)


@API.route("PATCH", CELL, summary="Change a cell's code, language or position; nothing runs", body=CellPatch,
           replies={200: Reply("The cell as it is now.", CellOut), 404: NO_CELL,
                    409: Reply("The cell's code is no longer base_code; nothing changed, the current cell is "
                               "in 'cell'.", EditConflictOut)})
async def update_cell(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    body = call.parsed(CellPatch)
    cell_id = call.param("cell_id")
    try:
        cell = await manager.update_cell(sid, cell_id, body.code, language=body.language, index=body.index,
                                         base_code=body.base_code, by="user")
    except UnknownCellError:
        raise unknown_cell(cell_id) from None
    return JSONResponse(cell.to_dict())


@API.route("DELETE", CELL, summary="Delete a cell", replies={200: Reply("Deleted.", Deleted), 404: NO_CELL})
async def delete_cell(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    cell_id = call.param("cell_id")
    try:
        await manager.delete_cell(sid, cell_id)
    except UnknownCellError:
        raise unknown_cell(cell_id) from None
    return JSONResponse({"deleted": True})


@API.route("POST", CELL + "/run",
           summary=f"Run a cell after its stale upstream cells (within {RUN_TIMEOUT:g} s, as the run_cell tool)",
           replies={200: Reply("The cell after its run.", RunOut), 404: NO_CELL})
async def run_cell(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    cell_id = call.param("cell_id")
    try:
        report = await manager.run_cell(sid, cell_id, timeout=RUN_TIMEOUT)
    except UnknownCellError:
        raise unknown_cell(cell_id) from None
    return JSONResponse({"cell": report.cell, "ran_upstream": report.ran_upstream, "blocked": report.blocked,
                         "seconds": round(report.duration, 3),
                         "note": waits_on_note(report.waits_on) if report.waits_on else None})


@API.route("POST", BASE + "/restart", body=RestartBody,
           summary="Restart the kernel (every variable goes; a run under way is interrupted), then optionally "
                   f"run every cell in order (each within {RUN_TIMEOUT:g} s)",
           replies={200: Reply("The notebook once done: every cell that ran before is marked previous_kernel.",
                               RestartOut)})
async def restart_kernel(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    body = call.parsed(RestartBody)
    reports = await manager.restart(sid, run_all=body.run_all, timeout=RUN_TIMEOUT)
    state = notebook_json(await manager.state(sid))
    return JSONResponse({**state, "ran": [r.cell["id"] for r in reports]})


@API.route("POST", CELL + "/interrupt",
           summary="Stop a running cell (KeyboardInterrupt; the kernel is restarted if it does not stop)",
           replies={200: Reply("What became of it.", InterruptOut), 404: NO_CELL})
async def interrupt_cell(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    cell_id = call.param("cell_id")
    nb = await manager.notebook(sid)
    cell = nb.find(cell_id)
    if cell is None:
        raise unknown_cell(cell_id)
    if await manager.interrupt(sid, cell_id):
        return JSONResponse({"cell_id": cell_id, "status": "interrupted"})
    if cell.status == "running":  # another server process runs it: ask that one
        await call.state.bus.control("interrupt_cell", f"{sid}/{cell_id}")
        return JSONResponse({"cell_id": cell_id, "status": "interrupting"})
    return JSONResponse({"cell_id": cell_id, "status": "not_running"})


__all__ = ["BASE", "notebooks", "session_notebook"]
