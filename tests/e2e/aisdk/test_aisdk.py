"""The npm package ``ai``, majors 5, 6 and 7 side by side (``ai5``, ``ai6``, ``ai7`` in
package.json), reads ``/api/chat``: each version's ``DefaultChatTransport``,
``readUIMessageStream`` and ``AbstractChat`` (what ``useChat`` wraps) drive text, text that
reaches the client while the provider's stream is held half way (a gate), a server tool, a
client tool, an approval and a denial with a reason, a reload that resumes the open turn, a
stop, a step restarted after a broken stream (live, in its text or in a tool call's
arguments, and with ``?steps=whole``), a
notebook change, a message with an image and a PDF (``file`` parts), and a message that steers
a turn waiting for an approval; ``check.mjs``
validates every chunk with that version's own ``uiMessageChunkSchema`` and refuses keys it
does not define.

Needs ``npm ci`` in this directory (``make e2e-deps``)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.media import PDF, PNG
from tests.support.paths import REPO
from tests.support.server import SCENARIOS, Server, scenario, server_errors, start_server
from tests.support.ui_stream import LIVE_TEXT, live_scenario, release

HERE = Path(__file__).parent
VERSIONS = ("5", "6", "7")
TOOLS = "tests.support.protocol_tools:TOOLS"

SLOW_TEXT = " ".join(f"part{i}" for i in range(120))
RESTART_TEXT = "This answer survives a stream that broke half way through its first attempt."
PROTOCOL_SCENARIOS = {
    "approve": {"name": "approve", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": "I will send it."},
                    {"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
        {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}]},
    # About three seconds of text: long enough that a reload, or a stop, finds it running.
    "slow": {"name": "slow", "fragment_size": 8, "delay_ms": 30,
             "steps": [{"blocks": [{"type": "text", "text": SLOW_TEXT}]}]},
    # The first attempt's stream breaks after four text fragments; the retry completes. One
    # file per version and mode: the fault hits the first attempt the server makes of that file.
    **{f"restart_{mode}{v}": {"name": f"restart_{mode}{v}", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": RESTART_TEXT}], "fault": {"kind": "drop", "after_events": 6}}]}
       for v in VERSIONS for mode in ("", "whole_")},
    # The first attempt breaks after its text has ended, in its tool call's arguments.
    **{f"restart_tool_{v}": {"name": f"restart_tool_{v}", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": "Let me add."},
                    {"type": "tool_use", "name": "calculator", "input": {"expression": "2+3"}}],
         "fault": {"kind": "drop", "after_events": 6}},
        {"blocks": [{"type": "text", "text": "The result is {{last}}."}]}]}
       for v in VERSIONS},
}



@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("aisdk")
    gate = tmp / "gate"
    os.mkfifo(gate)
    docs = {**{n: SCENARIOS[n] for n in ("echo", "chain", "client", "notebook")}, **PROTOCOL_SCENARIOS,
            "live": live_scenario(gate)}
    models = {n: scenario(tmp / f"{n}.json", doc) for n, doc in docs.items()}
    srv = start_server(tmp, model=models["echo"], env={"TURNSTREAM_TOOLS": TOOLS, "PYTHONPATH": str(REPO)})
    try:
        yield srv, {**models, "slow_text": SLOW_TEXT, "restart_text": RESTART_TEXT, "live_text": LIVE_TEXT,
                    "live_gate": str(gate)}
    finally:
        release(gate)
        srv.stop()
        assert server_errors(srv) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_ai_sdk_reads_the_chat_stream(served: tuple[Server, dict[str, str]], version: str) -> None:
    node = shutil.which("node")
    assert node, "node is required for this test"
    assert (HERE / "node_modules" / f"ai{version}").is_dir(), "run `make e2e-deps` (npm ci in tests/e2e/aisdk)"
    srv, models = served
    env = {**os.environ, "TS_URL": srv.url, "TS_KEY": srv.key, "TS_MODELS": json.dumps(models),
           "TS_VERSIONS": version, "TS_MEDIA": json.dumps({"png": base64.b64encode(PNG).decode(),
                                                            "pdf": base64.b64encode(PDF).decode()})}
    out = subprocess.run([node, "check.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [c["check"] for c in checks] == ["textCheck", "liveCheck", "serverToolCheck", "clientToolCheck",
                                            "approvalCheck", "resumeCheck", "stopCheck", "restartCheck",
                                            "restartToolCheck", "wholeStepsCheck", "notebookCheck", "fileCheck",
                                            "steeringCheck"]
    assert all(c["ok"] and c["version"] == int(version) for c in checks)
