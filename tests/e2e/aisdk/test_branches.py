"""Branches from ``useChat`` (docs/aisdk.md), with the npm package ``ai`` of each pinned
major (5, 6, 7): ``branches.mjs`` drives each one's ``AbstractChat`` (what ``useChat``
wraps) through an edit made with ``setMessages`` then ``sendMessage``, an edit made with
``sendMessage({ text, messageId })``, ``regenerate({ messageId })`` and ``regenerate()``,
and after each request checks that the server's branch shown is the conversation the Chat
holds (``GET /api/sessions/{id}``: the turns' ``parent_turn_id`` from ``current_leaf``) and
that the mock provider was sent that branch's path only. Each major speaks to the model in
another wire format.

Needs ``npm ci`` in this directory (``make e2e-deps``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.server import Server, server_errors, start_server

HERE = Path(__file__).parent
WIRE = {"5": "anthropic", "6": "openai", "7": "openai-responses"}
SCRIPT = {"steps": [{"blocks": [{"type": "text", "text": "re: {{input}}"}]}]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("aisdk-branches"), env=mock_provider.env())
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


@pytest.mark.parametrize("version", sorted(WIRE))
def test_use_chat_edits_and_regenerates_on_branches(served: Server, mock_provider: MockHandle, scenario_name: str,
                                                    version: str) -> None:
    node = shutil.which("node")
    assert node, "node is required for this test"
    assert (HERE / "node_modules" / f"ai{version}").is_dir(), "run `make e2e-deps` (npm ci in tests/e2e/aisdk)"
    model = f"{WIRE[version]}:{mock_provider.scenario(f'{scenario_name}-v{version}', SCRIPT)}"
    env = {**os.environ, "TS_URL": served.url, "TS_KEY": served.key, "TS_MOCK": mock_provider.base_url,
           "TS_MODELS": json.dumps({version: model}), "TS_VERSIONS": version}
    out = subprocess.run([node, "branches.mjs"], cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    checks = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert checks == [{"ok": True, "version": int(version), "check": "branches", "turns": 9}]
