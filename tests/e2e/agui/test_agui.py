"""The AG-UI protocol's own npm packages read ``/api/ag-ui``: ``@ag-ui/client``'s ``HttpAgent``
runs threads (text with reasoning, text that reaches the agent while the provider's stream is
held half way (a gate), a frontend tool answered in the next run, an approval interrupt
answered by the next run's ``resume``, approved and denied with a reason, or by a new user
message that denies it (docs/steering.md), a step restarted
after a broken stream (live, after a tool call, and with ``?steps=whole``), the notebook as
the run's state),
its verifier refusing any
event out of order, and ``check.mjs`` validates every event with ``@ag-ui/core``'s schemas,
refusing keys they do not define.

Needs ``npm ci`` in this directory (``make e2e-deps``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.server import SCENARIOS, Server, scenario, server_errors, start_server
from tests.support.ui_stream import LIVE_TEXT, live_scenario, release

HERE = Path(__file__).parent
TOOLS = "tests.support.protocol_tools:TOOLS"
RESTART_TEXT = "This answer survives a stream that broke half way through its first attempt."

AGUI_SCENARIOS = {
    "think": {"name": "think", "fragment_size": 5, "steps": [
        {"blocks": [{"type": "thinking", "thinking": "Let me think about that.", "signature": "sig-agui"},
                    {"type": "text", "text": "Thought about: {{input}}"}]}]},
    "approve": {"name": "approve", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": "I will send it."},
                    {"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
        {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}]},
    **{name: {"name": name, "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": RESTART_TEXT}], "fault": {"kind": "drop", "after_events": 6}}]}
       for name in ("restart", "restart_whole")},
    # A tool call, then the answer's stream breaks: the snapshot holds the call and its result.
    "restart_after_tool": {"name": "restart_after_tool", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": "Let me add."},
                    {"type": "tool_use", "name": "calculator", "input": {"expression": "2+3"}}]},
        {"blocks": [{"type": "text", "text": "The result is {{last}}, as computed."}],
         "fault": {"kind": "drop", "after_events": 3}}]},
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    docs = {**{n: SCENARIOS[n] for n in ("client", "notebook")}, **AGUI_SCENARIOS, "live": live_scenario(gate)}
    models = {n: scenario(tmp_path / f"{n}.json", doc) for n, doc in docs.items()}
    srv = start_server(tmp_path, model=models["think"], env={"TURNSTREAM_TOOLS": TOOLS, "PYTHONPATH": str(REPO)})
    try:
        yield srv, {**models, "restart_text": RESTART_TEXT, "live_text": LIVE_TEXT, "live_gate": str(gate)}
    finally:
        release(gate)
        srv.stop()
        assert server_errors(srv) == []


def test_ag_ui_client_reads_the_run_stream(served: tuple[Server, dict[str, str]]) -> None:
    node = shutil.which("node")
    assert node, "node is required for this test"
    assert (HERE / "node_modules" / "@ag-ui" / "client").is_dir(), "run `make e2e-deps` (npm ci in tests/e2e/agui)"
    srv, models = served
    env = {**os.environ, "TS_URL": srv.url, "TS_KEY": srv.key, "TS_MODELS": json.dumps(models)}
    out = subprocess.run([node, "check.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [c["check"] for c in checks] == ["textCheck", "liveCheck", "clientToolCheck", "approvalCheck",
                                            "steerCheck", "restartCheck", "restartAfterToolCheck", "wholeStepsCheck",
                                            "notebookCheck"]
