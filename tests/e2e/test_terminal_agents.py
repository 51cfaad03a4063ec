"""The terminal chat names the agent that speaks (docs/agents.md), in a real pseudo-terminal.

Three processes: ``turnstream mock-provider`` (both models: one over the Anthropic format,
one over OpenAI Chat Completions), ``turnstream serve --agents FILE`` (every new session gets
the file's agents) and ``turnstream chat --server`` under pexpect.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.support.mock_provider import MockHandle
from tests.support.server import Server, start_server
from tests.support.terminal import Chat

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")]

BIN = Path(sys.executable).parent / "turnstream"


@pytest.fixture(scope="module")
def models(mock_provider: MockHandle) -> tuple[str, str]:
    triage = mock_provider.scenario("term-agents-triage", {"fragment_size": 4, "turns": [
        [{"blocks": [{"type": "text", "text": "Fetching the writer."},
                     {"type": "tool_use", "name": "transfer_to_writer", "input": {}}]}]]})
    writer = mock_provider.scenario("term-agents-writer", {"fragment_size": 4, "steps": [
        {"blocks": [{"type": "text", "text": "never played"}]},
        {"blocks": [{"type": "text", "text": "Roses are red, said the writer."}]}]})
    return "anthropic:" + triage, "openai:" + writer


@pytest.fixture(scope="module")
def server(mock_provider: MockHandle, models: tuple[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("serve-agents")
    agents = workdir / "agents.json"
    agents.write_text(json.dumps([
        {"name": "triage", "model": models[0], "handoffs": ["writer"], "system": "Route the user."},
        {"name": "writer", "model": models[1], "system": "Write."},
    ]), encoding="utf-8")
    srv = start_server(workdir, model=models[0], env={
        "ANTHROPIC_BASE_URL": mock_provider.base_url, "ANTHROPIC_API_KEY": "test-key",
        "OPENAI_BASE_URL": mock_provider.base_url + "/v1", "OPENAI_API_KEY": "test-key",
        "TURNSTREAM_AGENTS": str(agents)})
    try:
        yield srv
    finally:
        srv.stop()


def test_the_terminal_names_each_agent_as_it_speaks(server: Server, models: tuple[str, str],
                                                    mock_provider: MockHandle, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TURNSTREAM_"))}
    env.update(TURNSTREAM_HOME=str(tmp_path / "home"), TERM="xterm", COLUMNS="200")
    (tmp_path / "root").mkdir()
    child = pexpect.spawn(str(BIN), ["chat", "--server", server.url, "--key", server.key or "",
                                     "--root", str(tmp_path / "root")],
                          env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    chat = Chat(child)
    try:
        chat.say("a poem please")
        chat.expect("triage:")
        chat.expect("Fetching the writer.")
        chat.expect("transfer_to_writer")
        chat.expect("writer:")
        chat.expect("Roses are red, said the writer.")
        chat.say("bye")
        assert chat.expect_exit() == 0
        assert "Traceback" not in chat.seen
    finally:
        if child.isalive():
            child.terminate(force=True)
    sent = mock_provider.requests(models[1])
    assert len(sent) == 1 and sent[0]["messages"][0] == {"role": "system", "content": "Write."}


def test_a_use_chat_session_gets_the_agents_file_too(server: Server) -> None:
    with server.client() as c:
        with c.stream("POST", "/api/chat", json={"id": "agents-chat", "trigger": "submit-message", "messages": [
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "a poem"}]}]}) as r:
            r.read()
        assert r.status_code == 200
        start = json.loads(r.text.split("\n\n")[0].removeprefix("data: "))
        got = c.get(f"/api/sessions/{start['messageMetadata']['session_id']}").json()
    assert [a["name"] for a in got["agents"]] == ["triage", "writer"] and got["current_agent"] == "writer"
    said = [(b["agent"], b["text"]) for b in got["turns"][0]["blocks"] if b["type"] == "text"]
    assert said == [("triage", "Fetching the writer."), ("writer", "Roses are red, said the writer.")]
