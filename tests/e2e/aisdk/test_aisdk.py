"""The npm package ``ai`` (v5) reads ``/api/chat``: its ``DefaultChatTransport`` validates
every chunk against its schema, ``readUIMessageStream`` builds the messages, and
``check.mjs`` also refuses keys the strict schema does not define.

Needs ``npm ci`` in this directory (``make aisdk-deps``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import SCENARIOS, Server, scenario, server_errors, start_server

HERE = Path(__file__).parent


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    models = {n: scenario(tmp_path / f"{n}.json", SCENARIOS[n]) for n in ("echo", "chain", "client")}
    srv = start_server(tmp_path, model=models["echo"])
    try:
        yield srv, models
    finally:
        srv.stop()
        assert server_errors(srv) == []


def test_ai_sdk_reads_the_chat_stream(served: tuple[Server, dict[str, str]]) -> None:
    node = shutil.which("node")
    assert node, "node is required for this test"
    assert (HERE / "node_modules" / "ai").is_dir(), "run `make aisdk-deps` (npm ci in tests/e2e/aisdk)"
    srv, models = served
    env = {**os.environ, "TS_URL": srv.url, "TS_KEY": srv.key, "TS_MODELS": json.dumps(models)}
    out = subprocess.run([node, "check.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [c["check"] for c in checks] == ["text", "server-tool", "client-tool"]
