"""The notebook toolset: the model reads, edits and runs the session's notebook.

The host puts a ``NotebookManager`` in ``deps["notebooks"]``; the notebook is the one of the
calling session. Results are small JSON-able dicts written for the model: outputs are shown
as text (tables as a plain preview, figures as a one-line summary) and long text is cut.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from ..notebook import NotebookManager, Output, RunReport
from ..notebook.running import waits_on_note
from ..tools import Tool, ToolContext, tool

TOOLSET = "notebook"
RUN_TIMEOUT = 30.0
MAX_TEXT = 4_000
MAX_TRACEBACK = 2_500


def _manager(ctx: ToolContext) -> NotebookManager:
    manager = ctx.deps.get("notebooks")
    if not isinstance(manager, NotebookManager):
        raise RuntimeError("the notebook is not available here (no deps['notebooks'])")
    return manager


def _cut(text: str, limit: int, *, keep_end: bool = False) -> str:
    if len(text) <= limit:
        return text
    note = f"… [{len(text) - limit} more characters]"
    return note + text[-limit:] if keep_end else text[:limit] + note


def _figure_summary(figure: dict[str, Any]) -> str:
    traces = figure.get("data") or []
    kinds = sorted({str(t.get("type", "scatter")) for t in traces if isinstance(t, dict)})
    title = ((figure.get("layout") or {}).get("title") or {})
    title_text = title.get("text") if isinstance(title, dict) else title
    summary = f"Plotly figure: {len(traces)} trace(s)" + (f" ({', '.join(kinds)})" if kinds else "")
    return summary + (f", title {title_text!r}" if title_text else "") + " (shown to the user)"


def compact_output(out: Output) -> dict[str, Any]:
    """One output as the model should see it."""
    if out["type"] == "stdout" or out["type"] == "stderr" or out["type"] == "text":
        return {"type": out["type"], "text": _cut(out["text"], MAX_TEXT)}
    if out["type"] == "table":
        return {"type": "table", "rows": out["rows"], "columns": out["columns"],
                "preview": _cut(out["text"], MAX_TEXT)}
    if out["type"] == "plotly":
        return {"type": "plotly", "summary": _figure_summary(out["figure"])}
    result: dict[str, Any] = {"type": "error", "error": f"{out['ename']}: {out['evalue']}"}
    if out["traceback"]:
        result["traceback"] = _cut(out["traceback"], MAX_TRACEBACK, keep_end=True)
    return result


def _outputs(cell: dict[str, Any]) -> list[dict[str, Any]]:
    return [compact_output(o) for o in cell.get("outputs") or []]


@tool(idempotent=True)
async def get_notebook_state(ctx: ToolContext, include_outputs: bool = False) -> dict[str, Any]:
    """List the notebook's cells in order: id, language, code, status, whether each is stale,
    the names it defines and uses, and the cells it depends on; and the data files the user
    uploaded (each is loaded as a DataFrame named `variable` when a cell uses that name).

    Args:
        include_outputs: Also include each cell's outputs (as text).
    """
    manager = _manager(ctx)
    state = await manager.state(ctx.session_id, include_outputs=include_outputs)
    await manager.mark_seen(ctx.session_id)
    cells = []
    for c in state["cells"]:
        item = {k: c[k] for k in ("id", "language", "code", "status", "stale", "execution_count",
                                  "defines", "uses", "depends_on")}
        if c.get("blocked_by"):
            item["blocked_by"] = c["blocked_by"]
        for flag in ("interrupted", "previous_kernel"):  # only when true: see restart_kernel, run_cell
            if c.get(flag):
                item[flag] = True
        if include_outputs:
            item["outputs"] = _outputs(c)
        cells.append(item)
    result: dict[str, Any] = {"cells": cells, "version": state["version"]}
    if state["files"]:
        result["files"] = [{k: v for k, v in f.items() if k != "sha256"} for f in state["files"]]
    return result


@tool
async def create_cell(ctx: ToolContext, code: str, language: Literal["python", "sql"] = "python",
                      after_cell_id: str | None = None) -> dict[str, Any]:
    """Add a cell to the notebook (it does not run until run_cell). Python cells share one
    namespace; SQL cells run in DuckDB over its DataFrames, `{{name}}` binds a Python value as
    a parameter, and a first line `-- name: result` stores the result as `result`.

    Args:
        code: The cell's source.
        language: "python" or "sql".
        after_cell_id: Insert after this cell; at the end when omitted.
    """
    manager = _manager(ctx)
    cell = await manager.create_cell(ctx.session_id, code, language, after_cell_id)
    nb = await manager.notebook(ctx.session_id)
    return {"cell_id": cell.id, "index": nb.index(cell.id), "language": cell.language,
            "status": cell.status}


@tool(idempotent=True)
async def update_cell(ctx: ToolContext, cell_id: str, code: str) -> dict[str, Any]:
    """Replace a cell's code. Nothing runs; the cell and the cells using its names become stale.

    Args:
        cell_id: The cell to change.
        code: Its new source.
    """
    manager = _manager(ctx)
    nb = await manager.notebook(ctx.session_id)
    before = nb.cell(cell_id)
    unseen, previous = manager.replaced_unseen(nb, before), before.code
    cell = await manager.update_cell(ctx.session_id, cell_id, code)
    state = await manager.state(ctx.session_id, include_outputs=False)
    stale = [c["id"] for c in state["cells"] if c["stale"] and c["id"] != cell.id]
    result: dict[str, Any] = {"cell_id": cell.id, "status": cell.status, "stale_cells": stale}
    if unseen:
        result["note"] = ("The user changed this cell after you last read the notebook; your code replaced "
                          "theirs, which is in replaced_code. Keep what they still need.")
        result["replaced_code"] = previous
    return result


def run_result(report: RunReport) -> dict[str, Any]:
    """A ``RunReport`` as the model reads it."""
    cell = report.cell
    result: dict[str, Any] = {"cell_id": cell["id"], "status": cell["status"],
                              "execution_count": cell.get("execution_count"),
                              "outputs": _outputs(cell), "ran_upstream": report.ran_upstream,
                              "seconds": round(report.duration, 3)}
    if report.waits_on:
        result["blocked_by"] = report.waits_on
        result["note"] = (f"Not run: {waits_on_note(report.waits_on)} It is not run again by itself; run it "
                          "(or change it) only if the user wants, or ask them.")
    elif cell.get("blocked_by"):
        result["blocked_by"] = cell["blocked_by"]
        result["note"] = (f"Not run: upstream cell {cell['blocked_by']} failed. "
                          "Fix that cell, then run this one again.")
    return result


# Running a cell again after a restart is what the dependency graph does anyway (the kernel's
# namespace is gone), and its effects stay inside the kernel's sandbox: safe to repeat.
@tool(timeout=RUN_TIMEOUT + 5, idempotent=True)
async def run_cell(ctx: ToolContext, cell_id: str) -> dict[str, Any]:
    """Run a cell, first running the stale cells it depends on. Waits up to 30 s; a cell that
    runs longer is stopped and the kernel restarts with an empty namespace. The kernel runs in a
    sandbox, usually without network access; files it writes last as long as the kernel.

    Args:
        cell_id: The cell to run.
    """
    manager = _manager(ctx)
    report = RunReport(cell={})
    try:
        await manager.run_cell(ctx.session_id, cell_id, timeout=RUN_TIMEOUT, report=report)
    except asyncio.CancelledError:
        ctx.cancel_note = cancel_note(manager, ctx.session_id, cell_id, report)
        raise
    return run_result(report)


def cancel_note(manager: NotebookManager, session_id: str, cell_id: str, report: RunReport) -> str:
    """What a ``run_cell`` cancelled with its turn tells the model: which cell had started and
    how it ended (the manager has ended it by then)."""
    if not report.started:
        return f"Not run: this call was stopped before cell {cell_id} started."
    which = report.interrupted or report.started[-1]
    cell = manager.cell_snapshot(session_id, which) or {"status": "error", "outputs": []}
    errors = [o for o in cell.get("outputs") or [] if o.get("type") == "error"]
    how = f"{errors[-1]['ename']}: {errors[-1]['evalue']}" if errors else f"status {cell['status']}"
    upstream = f" (it ran as an upstream cell of {cell_id})" if which != cell_id else ""
    return (f"Cell {which} started running{upstream} and was interrupted when this call was stopped "
            f"(the turn was cancelled or ran out of time); it ended with {how}")


@tool(timeout=RUN_TIMEOUT * 4)
async def restart_kernel(ctx: ToolContext, run_all: bool = False) -> dict[str, Any]:
    """Restart the notebook's kernel: every variable and import is gone, and every cell must run
    again. Use it when the kernel is broken (a half-imported module, a cell interrupted or timed
    out that left things inconsistent) or the user asks for it.

    Args:
        run_all: Then run every cell in order, stopping at the first that does not succeed.
    """
    manager = _manager(ctx)
    reports = await manager.restart(ctx.session_id, run_all=run_all, timeout=RUN_TIMEOUT)
    result: dict[str, Any] = {"restarted": True, "ran": [run_result(r) for r in reports]}
    if not run_all:
        result["note"] = "Every cell is stale now; run_cell runs what a cell needs first."
    return result


@tool(requires_approval=True, idempotent=True)
async def delete_cell(ctx: ToolContext, cell_id: str) -> dict[str, Any]:
    """Delete a cell from the notebook (the user must approve).

    Args:
        cell_id: The cell to delete.
    """
    manager = _manager(ctx)
    await manager.delete_cell(ctx.session_id, cell_id)
    nb = await manager.notebook(ctx.session_id)
    return {"deleted": cell_id, "remaining_cells": len(nb.cells)}


NOTEBOOK_TOOLS: list[Tool] = [get_notebook_state, create_cell, update_cell, run_cell, restart_kernel, delete_cell]

__all__ = ["NOTEBOOK_TOOLS", "TOOLSET", "compact_output", "create_cell", "delete_cell",
           "get_notebook_state", "restart_kernel", "run_cell", "run_result", "update_cell"]
