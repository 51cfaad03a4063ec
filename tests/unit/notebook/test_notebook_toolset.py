"""The notebook tools' declarations, and how outputs are shown to the model."""

from __future__ import annotations

from turnstream.notebook.model import Output
from turnstream.toolsets.notebook import MAX_TEXT, NOTEBOOK_TOOLS, TOOLSET, compact_output


def test_the_toolset_matches_the_spec() -> None:
    assert TOOLSET == "notebook"
    by_name = {t.name: t for t in NOTEBOOK_TOOLS}
    assert list(by_name) == ["get_notebook_state", "create_cell", "update_cell", "run_cell", "restart_kernel",
                            "delete_cell"]
    assert by_name["delete_cell"].requires_approval
    assert not any(t.requires_approval for n, t in by_name.items() if n != "delete_cell")
    assert by_name["run_cell"].timeout > 30
    assert all(t.context_param == "ctx" for t in NOTEBOOK_TOOLS)
    create = by_name["create_cell"].input_schema
    assert create["required"] == ["code"]
    assert create["properties"]["language"]["enum"] == ["python", "sql"]
    assert "ctx" not in create["properties"]
    assert by_name["get_notebook_state"].input_schema["properties"]["include_outputs"]["default"] is False


def test_compact_outputs() -> None:
    long: Output = {"type": "stdout", "text": "x" * (MAX_TEXT + 10)}
    cut = compact_output(long)
    assert cut["text"].startswith("x" * MAX_TEXT) and "10 more characters" in cut["text"]
    table: Output = {"type": "table", "html": "<table/>", "text": "   a\n0  1", "rows": 1, "columns": 1}
    assert compact_output(table) == {"type": "table", "rows": 1, "columns": 1, "preview": "   a\n0  1"}
    err: Output = {"type": "error", "ename": "E", "evalue": "bad", "traceback": "t" * 5000 + "END"}
    shown = compact_output(err)
    assert shown["error"] == "E: bad" and shown["traceback"].endswith("END")  # the end matters most
    plot: Output = {"type": "plotly", "figure": {"data": [{"type": "bar"}, {"type": "bar"}], "layout": {}}}
    summary = "Plotly figure: 2 trace(s) (bar) (shown to the user)"
    assert compact_output(plot) == {"type": "plotly", "summary": summary}
