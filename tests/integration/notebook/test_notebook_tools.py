"""The SPEC §12 tools, called the way the runtime calls them (through the ToolExecutor)."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from turnstream.blocks import ToolUseBlock
from turnstream.notebook import NotebookManager
from turnstream.tools.executor import Outcome, ToolExecutor
from turnstream.toolsets.notebook import NOTEBOOK_TOOLS

pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def manager() -> AsyncIterator[NotebookManager]:
    m = NotebookManager()
    yield m
    await m.aclose()


class Caller:
    def __init__(self, manager: NotebookManager) -> None:
        self.executor = ToolExecutor({t.name: t for t in NOTEBOOK_TOOLS}, deps={"notebooks": manager})
        self.session_id = f"tools-{next(_ids)}"

    async def outcome(self, name: str, **args: Any) -> Outcome:
        call = ToolUseBlock(tool_use_id=f"call-{next(_ids)}", name=name, input=args)
        outcome = await self.executor.decide(call)
        await self.executor.run([outcome], session_id=self.session_id, turn_id="turn-1")
        return outcome

    async def __call__(self, name: str, **args: Any) -> dict[str, Any]:
        outcome = await self.outcome(name, **args)
        assert not outcome.is_error, outcome.content
        result: dict[str, Any] = json.loads(outcome.content)
        return result


@pytest.fixture
def call(manager: NotebookManager) -> Caller:
    return Caller(manager)


async def test_the_model_builds_and_runs_a_notebook(call: Caller) -> None:
    first = await call("create_cell", code="import pandas as pd\nnums = pd.DataFrame({'n': range(30)})")
    assert first["status"] == "idle"
    second = await call("create_cell", code="-- name: big\nSELECT n FROM nums WHERE n >= {{cut}}",
                        language="sql")
    cut = await call("create_cell", code="cut = 25", after_cell_id=first["cell_id"])
    assert cut["index"] == 1

    state = await call("get_notebook_state")
    assert [c["id"] for c in state["cells"]] == [first["cell_id"], cut["cell_id"], second["cell_id"]]
    assert state["cells"][2]["depends_on"] == [first["cell_id"], cut["cell_id"]]
    assert state["cells"][2]["defines"] == ["big"] and "outputs" not in state["cells"][2]

    ran = await call("run_cell", cell_id=second["cell_id"])
    assert ran["status"] == "success"
    assert ran["ran_upstream"] == [first["cell_id"], cut["cell_id"]]
    table = ran["outputs"][-1]
    assert table["type"] == "table" and table["rows"] == 5 and "29" in table["preview"]
    assert "html" not in table  # the model reads text, the UI gets the HTML

    updated = await call("update_cell", cell_id=cut["cell_id"], code="cut = 28")
    assert updated["stale_cells"] == [second["cell_id"]]
    ran = await call("run_cell", cell_id=second["cell_id"])
    assert ran["ran_upstream"] == [cut["cell_id"]] and ran["outputs"][-1]["rows"] == 2

    with_outputs = await call("get_notebook_state", include_outputs=True)
    assert with_outputs["cells"][2]["outputs"][-1]["type"] == "table"


async def test_errors_and_figures_read_well(call: Caller) -> None:
    bad = await call("create_cell", code="def f():\n    return 1 / 0\nf()")
    below = await call("create_cell", code="g = f")
    result = await call("run_cell", cell_id=bad["cell_id"])
    assert result["status"] == "error"
    err = result["outputs"][-1]
    assert err["error"] == "ZeroDivisionError: division by zero"
    assert "line 2, in f" in err["traceback"]

    blocked = await call("run_cell", cell_id=below["cell_id"])
    assert blocked["status"] == "blocked" and blocked["blocked_by"] == bad["cell_id"]
    assert "upstream cell" in blocked["note"]

    fig = await call("create_cell", code="import plotly.express as px\n"
                                          "px.line(x=[1, 2, 3], y=[2, 4, 8], title='Growth')")
    shown = await call("run_cell", cell_id=fig["cell_id"])
    summary = "Plotly figure: 1 trace(s) (scatter), title 'Growth' (shown to the user)"
    assert shown["outputs"] == [{"type": "plotly", "summary": summary}]


async def test_mistakes_come_back_as_errors_the_model_can_act_on(call: Caller) -> None:
    await call("create_cell", code="1")
    unknown = await call.outcome("run_cell", cell_id="zzz")
    assert unknown.is_error and "No cell with id 'zzz'" in unknown.content
    bad_language = await call.outcome("create_cell", code="x", language="ruby")
    assert bad_language.is_error and "language" in bad_language.content


async def test_delete_needs_approval_and_then_removes_the_cell(call: Caller) -> None:
    cell = await call("create_cell", code="doomed = True")
    pending = await call.outcome("delete_cell", cell_id=cell["cell_id"])
    assert pending.kind == "approval" and not pending.content  # the executor waits for the user
    call.executor.approver = _approve
    assert await call("delete_cell", cell_id=cell["cell_id"]) == {"deleted": cell["cell_id"],
                                                                  "remaining_cells": 0}


async def _approve(call: ToolUseBlock, tool: Any) -> bool:
    return True
