"""The npm package ``ai``, majors 5, 6 and 7 side by side (``ai5``, ``ai6``, ``ai7`` in
package.json), reads ``/api/chat``: each version's ``DefaultChatTransport``,
``readUIMessageStream`` and ``AbstractChat`` (what ``useChat`` wraps) drive text, a server
tool, a client tool, an approval and a denial with a reason, a reload that resumes the open
turn, a stop, a step restarted after a broken stream and a notebook change; ``check.mjs``
validates every chunk with that version's own ``uiMessageChunkSchema`` and refuses keys it
does not define.

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
    # file per version: the fault hits the first attempt the server makes of that file.
    **{f"restart_{v}": {"name": f"restart_{v}", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": RESTART_TEXT}], "fault": {"kind": "drop", "after_events": 6}}]}
       for v in ("5", "6", "7")},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("aisdk")
    docs = {**{n: SCENARIOS[n] for n in ("echo", "chain", "client", "notebook")}, **PROTOCOL_SCENARIOS}
    models = {n: scenario(tmp / f"{n}.json", doc) for n, doc in docs.items()}
    srv = start_server(tmp, model=models["echo"], env={"TURNSTREAM_TOOLS": TOOLS, "PYTHONPATH": str(REPO)})
    try:
        yield srv, {**models, "slow_text": SLOW_TEXT, "restart_text": RESTART_TEXT}
    finally:
        srv.stop()
        assert server_errors(srv) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_ai_sdk_reads_the_chat_stream(served: tuple[Server, dict[str, str]], version: str) -> None:
    node = shutil.which("node")
    assert node, "node is required for this test"
    assert (HERE / "node_modules" / f"ai{version}").is_dir(), "run `make e2e-deps` (npm ci in tests/e2e/aisdk)"
    srv, models = served
    env = {**os.environ, "TS_URL": srv.url, "TS_KEY": srv.key, "TS_MODELS": json.dumps(models),
           "TS_VERSIONS": version}
    out = subprocess.run([node, "check.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [c["check"] for c in checks] == ["textCheck", "serverToolCheck", "clientToolCheck", "approvalCheck",
                                            "resumeCheck", "stopCheck", "restartCheck", "notebookCheck"]
    assert all(c["ok"] and c["version"] == int(version) for c in checks)
