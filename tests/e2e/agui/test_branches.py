"""An AG-UI thread whose message history diverges from the stored branch (docs/ag-ui.md):
``branches.mjs`` runs ``@ag-ui/client``'s ``HttpAgent``, drops the messages from the second
user message on, sends an edited one and goes on; each new turn follows the last turn the
history agrees with (``parent_turn_id``, ``current_leaf``), and the mock provider is sent
that branch's path only.

Needs ``npm ci`` in this directory (``make e2e-deps``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.mock_provider import MockHandle
from tests.support.server import server_errors, start_server

HERE = Path(__file__).parent
SCRIPT = {"steps": [{"blocks": [{"type": "text", "text": "re: {{input}}"}]}]}


def test_a_diverging_history_starts_a_branch(tmp_path: Path, mock_provider: MockHandle, scenario_name: str) -> None:
    node = shutil.which("node")
    assert node, "node is required for this test"
    assert (HERE / "node_modules" / "@ag-ui" / "client").is_dir(), "run `make e2e-deps` (npm ci in tests/e2e/agui)"
    srv = start_server(tmp_path, env=mock_provider.env())
    try:
        env = {**os.environ, "TS_URL": srv.url, "TS_KEY": srv.key, "TS_MOCK": mock_provider.base_url,
               "TS_MODEL": f"anthropic:{mock_provider.scenario(scenario_name, SCRIPT)}"}
        out = subprocess.run([node, "branches.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
    finally:
        srv.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")] == [
        {"ok": True, "check": "branches", "turns": 5}]
    assert server_errors(srv) == []
