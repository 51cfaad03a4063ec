"""Branches from ``useChat`` (docs/aisdk.md), with the npm package ``ai`` of each pinned
major (5, 6, 7): ``branches.mjs`` drives each one's ``AbstractChat`` (what ``useChat``
wraps) through an edit made with ``setMessages`` then ``sendMessage``, an edit made with
``sendMessage({ text, messageId })``, ``regenerate({ messageId })`` and ``regenerate()``,
and after each request checks that the server's branch shown is the conversation the Chat
holds (``GET /api/sessions/{id}``: the turns' ``parent_turn_id`` from ``current_leaf``) and
that the mock provider was sent that branch's path only. Each major speaks to the model in
another wire format. At the wire level: while the chat's turn waits for an approval, an edit
or a regenerate is refused with 409 and starts nothing, and the ordinary next message still
steers the turn (docs/steering.md), as before branches.

Needs ``npm ci`` in this directory (``make e2e-deps``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.paths import REPO
from tests.support.server import Server, server_errors, start_server
from tests.support.ui_stream import chunks, user

HERE = Path(__file__).parent
WIRE = {"5": "anthropic", "6": "openai", "7": "openai-responses"}
SCRIPT = {"steps": [{"blocks": [{"type": "text", "text": "re: {{input}}"}]}]}
APPROVE = {"steps": [{"blocks": [{"type": "tool_use", "name": "send_note", "input": {"to": "ada", "text": "hi"}}]},
                     {"blocks": [{"type": "text", "text": "done: {{last}}"}]}]}
TOOLS = "tests.support.protocol_tools:TOOLS"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("aisdk-branches"),
                       env={**mock_provider.env(), "TURNSTREAM_TOOLS": TOOLS, "PYTHONPATH": str(REPO)})
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


def test_a_branch_never_steers_the_open_turn(served: Server, mock_provider: MockHandle, scenario_name: str) -> None:
    model = f"anthropic:{mock_provider.scenario(scenario_name, APPROVE)}"
    body = {"id": f"steer-{scenario_name}", "model": model, "toolset": "none"}
    first, second = user("send the note"), user("no, not now")
    with served.client() as c:
        c.headers["X-AI-SDK-Version"] = "6"

        def post(extra: dict[str, Any]) -> tuple[int, list[Any]]:
            with c.stream("POST", "/api/chat", json={**body, **extra}) as r:
                r.read()
            return r.status_code, chunks(r.text) if r.status_code == 200 else []

        status, out = post({"messages": [first]})
        assert status == 200 and out[-2]["messageMetadata"]["status"] == "awaiting_client"
        turn, sid = out[0]["messageId"], out[0]["messageMetadata"]["session_id"]
        answer = {"id": turn, "role": "assistant", "parts": []}
        # The first message edited in place, and the waiting answer regenerated: both would be branches.
        edited = {**first, "parts": [{"type": "text", "text": "send it to Bob"}]}
        assert post({"messages": [edited], "messageId": first["id"]})[0] == 409
        assert post({"messages": [first], "trigger": "regenerate-message", "messageId": turn})[0] == 409
        assert [t["id"] for t in c.get(f"/api/sessions/{sid}").json()["turns"]] == [turn]
        # The next message of the branch shown steers the waiting turn, as before branches.
        status, out = post({"messages": [first, answer, second]})
        assert status == 200 and out[0]["data"]["outcome"] == "denied"
        session = c.get(f"/api/sessions/{sid}").json()
        assert [t["id"] for t in session["turns"]] == [turn] and session["current_leaf"] == turn
