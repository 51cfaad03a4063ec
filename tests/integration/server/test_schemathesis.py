"""schemathesis fuzzes every operation of ``/openapi.json`` (coverage, fuzzing and stateful
phases, bounded) against a real server and finds no 5xx.

One worker: with several, schemathesis' threads call ``ast.parse`` at once, which trips a
CPython 3.11 bug ("AST constructor recursion depth mismatch") inside hypothesis."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.server import server_errors, start_server


def test_no_server_error_under_fuzzing(tmp_path: Path) -> None:
    srv = start_server(tmp_path, model="scripted:echo")
    try:
        exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
        out = subprocess.run(
            [exe, "run", f"{srv.url}/openapi.json", "--checks", "not_a_server_error",
             "-H", f"Authorization: Bearer {srv.key}", "--max-examples", "12", "--seed", "20240611",
             "--phases", "coverage,fuzzing,stateful", "--workers", "1", "--no-color",
             "--report-dir", str(tmp_path / "report")],
            capture_output=True, text=True, timeout=240, cwd=tmp_path)
    finally:
        srv.stop()
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert " passed" in out.stdout
    assert server_errors(srv) == []
