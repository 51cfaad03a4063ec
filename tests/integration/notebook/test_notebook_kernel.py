"""The subprocess kernel on its own: namespace, outputs, limits, SQL binding, figures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import pytest_asyncio

from turnstream.notebook import Kernel, KernelLimits

pytestmark = pytest.mark.asyncio(loop_scope="module")

EVIL = "x'; DROP TABLE t; --"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def kernel() -> AsyncIterator[Kernel]:
    k = Kernel(KernelLimits(time_limit=20, memory_bytes=1024**3))
    await k.start()
    yield k
    await k.aclose()


@pytest_asyncio.fixture(loop_scope="module")
async def quick_kernel() -> AsyncIterator[Kernel]:
    """A kernel with a short time limit, for the kill-and-restart tests."""
    k = Kernel(KernelLimits(time_limit=0.5))
    yield k
    await k.aclose()


async def test_cells_share_one_namespace_and_show_stdout_and_the_last_value(kernel: Kernel) -> None:
    r = await kernel.execute("shared = 21\nprint('hello')")
    assert r.status == "success"
    assert r.outputs == [{"type": "stdout", "text": "hello\n"}]
    r = await kernel.execute("shared * 2")
    assert r.outputs == [{"type": "text", "text": "42"}]
    r = await kernel.execute("shared;")  # a trailing semicolon hides the value
    assert r.outputs == []


async def test_errors_carry_the_cell_traceback_and_the_kernel_survives(kernel: Kernel) -> None:
    r = await kernel.execute("print('before')\n1 / 0", filename="<cell abc>")
    assert r.status == "error"
    assert r.outputs[0] == {"type": "stdout", "text": "before\n"}
    err = r.outputs[-1]
    assert err["type"] == "error"
    assert err["ename"] == "ZeroDivisionError"
    assert '"<cell abc>", line 2' in err["traceback"]
    assert "child.py" not in err["traceback"]
    for code in ("import sys; sys.exit(3)", "input()", "raise KeyboardInterrupt"):
        assert (await kernel.execute(code)).status == "error"
    assert (await kernel.execute("import os; os.write(1, b'stray bytes\\n'); 'ok'")).outputs == [
        {"type": "text", "text": "'ok'"}]  # writes to fd 1 cannot corrupt the protocol


async def test_memory_limit_is_a_memory_error_not_a_dead_kernel(kernel: Kernel) -> None:
    r = await kernel.execute("hog = bytearray(4 * 1024**3)")
    assert r.status == "error"
    assert r.outputs[-1]["type"] == "error" and r.outputs[-1]["ename"] == "MemoryError"
    assert (await kernel.execute("shared")).outputs == [{"type": "text", "text": "21"}]


async def test_sql_binds_params_as_values_and_an_injection_stays_a_value(kernel: Kernel) -> None:
    setup = (
        "import pandas as pd\n"
        f"evil = {EVIL!r}\n"
        f"people = pd.DataFrame({{'name': ['ann', {EVIL!r}], 'age': [31, 7]}})\n"
    )
    assert (await kernel.execute(setup)).status == "success"
    assert (await kernel.execute("CREATE TABLE t AS SELECT 1 AS a", "sql")).status == "success"

    r = await kernel.execute("-- name: hit\nSELECT name, age FROM people WHERE name = {{evil}}", "sql",
                             result_name="hit")
    assert r.status == "success", r.outputs
    table = r.outputs[-1]
    assert table["type"] == "table"
    assert (table["rows"], table["columns"]) == (1, 2)
    assert "<table" in table["html"] and "DROP TABLE" in table["text"]

    survived = await kernel.execute("SELECT count(*) AS n FROM t", "sql")
    assert survived.status == "success", survived.outputs  # the DROP never ran
    r = await kernel.execute("(len(hit), int(hit['age'].iloc[0]))")  # the named result is a DataFrame
    assert r.outputs == [{"type": "text", "text": "(1, 7)"}]

    r = await kernel.execute("SELECT {{missing}}", "sql")
    assert r.status == "error"
    assert "{{missing}} is not defined" in r.outputs[-1]["evalue"]  # type: ignore[typeddict-item]


async def test_plotly_figures_come_back_as_figure_json(kernel: Kernel) -> None:
    r = await kernel.execute(
        "import plotly.graph_objects as go\n"
        "go.Figure(go.Bar(x=['a', 'b'], y=[3, 4]), layout={'title': {'text': 'Sales'}})")
    assert r.status == "success", r.outputs
    out = r.outputs[-1]
    assert out["type"] == "plotly"
    assert out["figure"]["data"][0]["type"] == "bar"
    assert out["figure"]["layout"]["title"]["text"] == "Sales"


async def test_time_limit_kills_the_child_and_the_next_run_gets_a_fresh_one(quick_kernel: Kernel) -> None:
    assert (await quick_kernel.execute("kept = 1")).status == "success"
    first_pid, first_generation = quick_kernel.pid, quick_kernel.generation
    r = await quick_kernel.execute("while True:\n    pass")
    assert r.status == "error" and r.restarted
    err = r.outputs[0]
    assert err["type"] == "error" and err.get("timed_out") is True
    assert "time limit of 0.5 s" in err["evalue"]
    assert not quick_kernel.alive

    r = await quick_kernel.execute("'alive'")
    assert r.outputs == [{"type": "text", "text": "'alive'"}]
    assert quick_kernel.pid != first_pid and quick_kernel.generation == first_generation + 1
    assert (await quick_kernel.execute("kept")).status == "error"  # the namespace went with the child


async def test_cancelling_a_run_kills_the_child(quick_kernel: Kernel) -> None:
    await quick_kernel.start()
    generation = quick_kernel.generation
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                await quick_kernel.execute("import time\ntime.sleep(60)", time_limit=60)

            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
    assert not quick_kernel.alive
    assert (await quick_kernel.execute("1 + 1")).outputs == [{"type": "text", "text": "2"}]
    assert quick_kernel.generation == generation + 1


async def test_secrets_in_the_environment_do_not_reach_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    k = Kernel()
    try:
        r = await k.execute("import os\n(os.environ.get('ANTHROPIC_API_KEY'), 'PATH' in os.environ)")
        assert r.outputs == [{"type": "text", "text": "(None, True)"}]
    finally:
        await k.aclose()


async def test_a_cell_that_ends_the_process_is_reported_and_the_kernel_comes_back(kernel: Kernel) -> None:
    r = await kernel.execute("import os\nos._exit(7)")
    assert r.status == "error" and r.restarted
    err = r.outputs[0]
    assert err["type"] == "error" and err["ename"] == "KernelDied" and "exit status 7" in err["evalue"]
    assert (await kernel.execute("'back'")).outputs == [{"type": "text", "text": "'back'"}]


async def test_sql_sums_of_integers_stay_integers(kernel: Kernel) -> None:
    """DuckDB sums integers as HUGEINT, which pandas would show as 260.0 (issue 16, point 8)."""
    setup = "import pandas as pd\norders = pd.DataFrame({'region': ['N', 'S', 'N'], 'units': [120, 80, 140]})"
    assert (await kernel.execute(setup)).status == "success"
    r = await kernel.execute("-- name: totals\nSELECT region, SUM(units) AS units, AVG(units) AS mean FROM orders "
                             "GROUP BY region ORDER BY region", "sql", result_name="totals")
    assert r.status == "success", r.outputs
    assert "260.0" not in r.outputs[-1]["text"] and "260" in r.outputs[-1]["text"]
    r = await kernel.execute("(str(totals['units'].dtype), totals['units'].tolist(), str(totals['mean'].dtype))")
    assert r.outputs == [{"type": "text", "text": "('int64', [260, 80], 'float64')"}]


async def test_a_time_limit_is_shown_rounded(quick_kernel: Kernel) -> None:
    r = await quick_kernel.execute("while True:\n    pass", time_limit=0.499873)
    assert "time limit of 0.5 s" in r.outputs[0]["evalue"]  # not 0.499873 s
