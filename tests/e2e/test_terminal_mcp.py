"""The terminal chat with MCP servers (``TURNSTREAM_MCP_CONFIG``): an MCP server's question (an elicitation) is asked
field by field at the prompt, a bad value is asked again, and the answer (or a decline) goes
back to the server; a real ``turnstream chat`` under a pty, the tests' MCP server over stdio
and the mock provider in Anthropic's format."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest

from tests.support.mock_provider import MockHandle
from tests.support.server import Server, start_server
from tests.support.terminal import Chat

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")]

BIN = Path(sys.executable).parent / "turnstream"
ROOT = Path(__file__).resolve().parents[2]
SIGNUP = {"fragment_size": 5, "turns": [
    [{"blocks": [{"type": "tool_use", "name": "t__signup", "input": {}}]},
     {"blocks": [{"type": "text", "text": "Signed up: {{last}}"}]}],
    [{"blocks": [{"type": "tool_use", "name": "t__signup", "input": {}}]},
     {"blocks": [{"type": "text", "text": "Not signed up: {{last}}"}]}]]}


PAINT = {"fragment_size": 5, "turns": [
    [{"blocks": [{"type": "tool_use", "name": "t__paint", "input": {}}]},
     {"blocks": [{"type": "text", "text": "Painted: {{last}}"}]}]]}


@contextmanager
def mcp_chat(tmp_path: Path, mock: MockHandle, model: str, server: str, mode: str, *,
             remote: bool = False) -> Iterator[tuple[Chat, pexpect.spawn]]:
    """``turnstream chat`` under a pty with the tests' MCP server (``server``, over ``mode``),
    the model ``model`` from the mock provider; with ``remote`` the MCP server and the model
    run under a ``turnstream serve`` and the chat talks to it (``--server``)."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {server: {
        "command": sys.executable, "args": ["-m", "tests.support.mcp_server", mode], "cwd": str(ROOT)}}}))
    provider_env = {"ANTHROPIC_BASE_URL": mock.base_url, "ANTHROPIC_API_KEY": "test-key",
                    "TURNSTREAM_MCP_CONFIG": str(config)}
    served: Server | None = None
    if remote:
        workdir = tmp_path / "serve"
        workdir.mkdir()
        served = start_server(workdir, model=model, env=provider_env)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TURNSTREAM_"))}
        args = ["chat", "--server", served.url, "--key", served.key, "--root", str(tmp_path)]
    else:
        env = dict(os.environ, **provider_env)
        args = ["chat", "--model", model, "--root", str(tmp_path)]
    env.update(TURNSTREAM_HOME=str(tmp_path / "home"), TERM="xterm", COLUMNS="200")
    child = pexpect.spawn(str(BIN), args, env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    try:
        yield Chat(child), child
    finally:
        if child.isalive():
            child.terminate(force=True)
        if served is not None:
            served.stop()


def decline_the_next_question(chat: Chat) -> None:
    """Ask again, decline the server's question (``/decline``), see the tool say so, and leave."""
    chat.say("again")
    chat.expect(r"Name.*\(text\)")
    chat.child.sendline("/decline")
    chat.expect("declined")
    chat.expect("Not signed up: ")
    chat.say("bye")
    assert chat.expect_exit() == 0


def results_read(mock: MockHandle, model: str) -> list[str]:
    """The messages of tool results the model read, in order, as JSON."""
    return [json.dumps(r["messages"][-1]) for r in mock.requests(model) if r["messages"][-1]["role"] == "user"
            and isinstance(r["messages"][-1]["content"], list)]


def test_an_mcp_question_is_asked_field_by_field_then_declined(tmp_path: Path, mock_provider: MockHandle) -> None:
    model = "anthropic:" + mock_provider.scenario("chat-signup", SIGNUP)
    with mcp_chat(tmp_path, mock_provider, model, "t", "stdio") as (chat, child):
        chat.say("sign me up")
        chat.expect(r"t__signup asks:.*Sign up for the course")
        chat.expect(r"Name.*\(text\)")
        child.sendline("Ann")
        chat.expect(r"Age.*\(whole number\)")
        child.sendline("thirty")
        chat.expect("Age needs a whole number")
        chat.expect(r"Age.*\(whole number\)")
        child.sendline("33")
        chat.expect(r"Newsletter.*\(y/n\)")
        child.sendline("y")
        chat.expect(r"Plan.*\(1 free / 2 pro\)")
        child.sendline("2")
        chat.expect("answered")
        chat.expect(r"Signed up: Ann \(33\) is on the pro plan, with the newsletter")
        decline_the_next_question(chat)
    # the model read the server's answers: the form's values, then the decline
    results = results_read(mock_provider, model)
    assert any("Ann (33) is on the pro plan" in r for r in results)
    assert "Ann" not in results[-1]


def test_in_server_mode_the_chat_asks_the_servers_mcp_question(tmp_path: Path, mock_provider: MockHandle) -> None:
    """``turnstream serve`` runs the MCP server; the question reaches ``turnstream chat --server``,
    which asks it field by field and answers through the tool-results route."""
    model = "anthropic:" + mock_provider.scenario("remote-signup", SIGNUP)
    with mcp_chat(tmp_path, mock_provider, model, "t", "stdio", remote=True) as (chat, child):
        chat.say("sign me up")
        chat.expect(r"t__signup asks:.*Sign up for the course")
        chat.expect(r"Name.*\(text\)")
        child.sendline("Ann")
        chat.expect(r"Age.*\(whole number\)")
        child.sendline("old")
        chat.expect("Age needs a whole number")
        chat.expect(r"Age.*\(whole number\)")
        child.sendline("33")
        chat.expect(r"Newsletter.*\(y/n\)")
        child.sendline("n")
        chat.expect(r"Plan.*\(1 free / 2 pro\)")
        child.sendline("free")
        chat.expect("answered")
        chat.expect(r"Signed up: Ann \(33\) is on the free plan")
        decline_the_next_question(chat)
    results = results_read(mock_provider, model)
    assert any("Ann (33) is on the free plan" in r for r in results)
    assert "Ann" not in results[-1]


def test_a_multi_select_question_is_asked_as_one_and_answered_with_an_array(
        tmp_path: Path, mock_provider: MockHandle) -> None:
    """Issue 27, item 6: an array of an enum (server-everything's trigger-elicitation-request
    asks one) takes several choices, and at least ``minItems`` of them."""
    model = "anthropic:" + mock_provider.scenario("chat-paint", PAINT)
    with mcp_chat(tmp_path, mock_provider, model, "t", "stdio") as (chat, child):
        chat.say("paint it")
        chat.expect(r"t__paint asks:.*Which colours, and what size\?")
        chat.expect(r"Colors.*\(1 red / 2 green / 3 blue; several, with commas\)")
        child.sendline(",")
        chat.expect("Colors needs at least 1 of red, green, blue")
        child.sendline("1, blue")
        chat.expect(r"Size.*\(1 S / 2 M / 3 L\)")
        child.sendline("2")
        chat.expect("answered")
        chat.expect(r"Painted: red, blue in M")
        chat.say("bye")
        assert chat.expect_exit() == 0


HAIKU = {"fragment_size": 5,
         "replies": [{"when": {"input": "haiku about (?P<topic>\\w+)"}, "steps": [
             {"blocks": [{"type": "text", "text": "{{match.topic}} on the tin roof"}]}]}],
         "steps": [{"blocks": [{"type": "tool_use", "name": "o__haiku", "input": {"topic": "rain"}}]},
                   {"blocks": [{"type": "text", "text": "The poem: {{last}}"}]}]}


def test_an_mcp_servers_sampling_request_is_approved_at_the_prompt_and_answered_by_the_chats_model(
        tmp_path: Path, mock_provider: MockHandle) -> None:
    """Issue 27, item 9: the server's haiku tool asks the client's model (sampling) mid-call;
    under TURNSTREAM_MCP_SAMPLING=ask (the default) the chat asks y/n, then the chat's own
    model writes the haiku in a request of its own (no tools, the server's system prompt)."""
    model = "anthropic:" + mock_provider.scenario("chat-haiku", HAIKU)
    with mcp_chat(tmp_path, mock_provider, model, "o", "stdio-2025") as (chat, child):
        chat.say("a poem please")
        chat.expect(r"o__haiku asks:.*'o' asks to use the model \(sampling, up to 60 tokens\)")
        chat.expect(r"accept\?.*\(y/n\)")
        child.sendline("y")
        chat.expect("accepted")
        chat.expect(r"o__haiku used the model: \d+ tokens in, \d+ out")
        chat.expect(r"The poem: .* wrote: rain on the tin roof")
        chat.say("bye")
        assert chat.expect_exit() == 0
    sampled = [r for r in mock_provider.requests(model) if r.get("system") and "poet" in json.dumps(r["system"])]
    assert len(sampled) == 1 and not sampled[0].get("tools")
    assert "Write a haiku about rain." in json.dumps(sampled[0]["messages"])


def test_in_server_mode_the_chat_approves_the_servers_sampling_request(
        tmp_path: Path, mock_provider: MockHandle) -> None:
    """``turnstream serve`` runs the MCP server and answers its sampling request with the
    server's model once ``turnstream chat --server`` said yes (through the tool-results route)."""
    model = "anthropic:" + mock_provider.scenario("remote-haiku", HAIKU)
    with mcp_chat(tmp_path, mock_provider, model, "o", "stdio-2025", remote=True) as (chat, child):
        chat.say("a poem please")
        chat.expect(r"o__haiku asks:.*'o' asks to use the model")
        chat.expect(r"accept\?.*\(y/n\)")
        child.sendline("y")
        chat.expect("accepted")
        chat.expect(r"o__haiku used the model: \d+ tokens in, \d+ out")
        chat.expect(r"The poem: .* wrote: rain on the tin roof")
        chat.say("bye")
        assert chat.expect_exit() == 0
    sampled = [r for r in mock_provider.requests(model) if r.get("system") and "poet" in json.dumps(r["system"])]
    assert len(sampled) == 1 and not sampled[0].get("tools")
