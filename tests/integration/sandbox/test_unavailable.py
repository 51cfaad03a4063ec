"""When no sandbox can start, no cell runs, and both the tool result (what the model reads)
and the page say why; running unsandboxed takes an explicit setting, announced at start and
on the page."""

from __future__ import annotations

from pathlib import Path

from tests.integration.sandbox.cells import SANDBOXED, Notebook
from tests.support.processes import sandbox_processes
from tests.support.server import start_server


def test_without_bubblewrap_no_cell_runs_and_the_model_and_the_page_say_why(tmp_path: Path, model: str) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    srv = start_server(tmp_path, model=model, env={**SANDBOXED, "PATH": str(empty)})  # no bwrap to be found
    try:
        assert any(line.startswith("WARNING: No notebook cell can run: bubblewrap") for line in srv.output)
        nb = Notebook(srv)
        result = nb.run("open('/etc/shadow').read()")
        assert result["status"] == "error"
        error = result["outputs"][-1]["error"]
        assert error.startswith("SandboxUnavailable: No notebook cell can run: bubblewrap (bwrap)")
        assert "apt install bubblewrap" in error and "TURNSTREAM_NOTEBOOK_SANDBOX=off" in error
        assert sandbox_processes(srv.proc.pid) == set()
        sandbox = nb.state()["sandbox"]
        assert sandbox["mode"] == "unavailable"
        assert sandbox["warning"] == error.removeprefix("SandboxUnavailable: ")
    finally:
        srv.stop()


def test_running_unsandboxed_takes_an_explicit_setting_and_is_announced(tmp_path: Path, model: str) -> None:
    srv = start_server(tmp_path, model=model, env={"TURNSTREAM_NOTEBOOK_SANDBOX": "off"})
    try:
        warning = next(line for line in srv.output if line.startswith("WARNING: "))
        assert "WITHOUT a sandbox (TURNSTREAM_NOTEBOOK_SANDBOX=off)" in warning
        nb = Notebook(srv)
        assert nb.value("6 * 7") == "42"
        sandbox = nb.state()["sandbox"]
        assert sandbox["mode"] == "off"
        assert sandbox["warning"] == warning.removeprefix("WARNING: ")
    finally:
        srv.stop()
