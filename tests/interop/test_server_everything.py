"""turnstream with the MCP reference server ``@modelcontextprotocol/server-everything``
(2026.8.31 from npm, pinned in ``everything/package-lock.json``; Node.js, protocol 2025-11-25)
over stdio, its tools called by ``turnstream mock-provider`` playing the model (Anthropic's
format, over HTTP): issue 27's "server-everything's progress, sampling and elicitation tools
work through ``turnstream serve`` and ``turnstream chat``".

The server's tools used here (its ``dist/tools/``):

* ``trigger-long-running-operation`` (``duration`` seconds, ``steps``): sends
  ``notifications/progress`` ``{progress: i, total: steps}`` at each step when the call carried
  a ``progressToken``, then ``Long running operation completed. Duration: …``.
* ``trigger-sampling-request`` (``prompt``, ``maxTokens``): sends ``sampling/createMessage``
  (system prompt ``You are a helpful test server.``, the text ``Resource
  trigger-sampling-request context: <prompt>``) and answers ``LLM sampling result:`` and the
  ``CreateMessageResult`` as JSON. Registered only for a client that declares ``sampling``.
* ``trigger-elicitation-request``: sends ``elicitation/create`` with thirteen fields (text,
  boolean, formats, numbers, single selects, two multi-selects, a legacy ``enumNames`` select)
  and answers with what it got, its ``Raw result`` as JSON. Registered only for a client that
  declares ``elicitation``.

Through ``turnstream serve`` (real HTTP and SSE): progress as ``tool_progress`` events before
the result; sampling answered by the session's model under ``TURNSTREAM_MCP_SAMPLING=allow``
and ``ask`` (approved through the tool-results route), metered as a sub-step; the elicitation
answered through the tool-results route (a bad answer refused with 422 first), a multi-select
reaching the server as an array. Through ``turnstream chat`` under a pty: progress on the
spinner line, the elicitation asked field by field, the sampling request approved at y/n.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.interop import servers
from tests.support.mock_provider import MockHandle
from tests.support.server import Event, Server, mcp_stderr, new_session, run_turn, server_errors, sse, start_server
from tests.support.terminal import Chat

VERSION = "2026.8.31"
SERVER = "everything"
PROGRESS_TOOL = f"{SERVER}__trigger-long-running-operation"
SAMPLING_TOOL = f"{SERVER}__trigger-sampling-request"
ELICITATION_TOOL = f"{SERVER}__trigger-elicitation-request"
TOOLS = [PROGRESS_TOOL, SAMPLING_TOOL, ELICITATION_TOOL]
BIN = Path(sys.executable).parent / "turnstream"

SAMPLED = {"input_tokens": 11, "output_tokens": 9}
STEP = {"input_tokens": 20, "output_tokens": 5}
MODEL = {
    "fragment_size": 7,
    "replies": [
        # the server's sampling request: its only message is "Resource trigger-sampling-request context: …"
        {"when": {"input": "context: a haiku about (?P<topic>\\w+)"},
         "steps": [{"blocks": [{"type": "text", "text": "{{match.topic}} drums on the tin roof"}], "usage": SAMPLED}]},
        {"when": {"input": "long operation", "tools": [PROGRESS_TOOL]}, "steps": [
            {"blocks": [{"type": "tool_use", "name": PROGRESS_TOOL, "input": {"duration": 1.5, "steps": 3}}],
             "usage": STEP},
            {"blocks": [{"type": "text", "text": "Finished: {{last}}"}], "usage": STEP}]},
        {"when": {"input": "use the model", "tools": [SAMPLING_TOOL]}, "steps": [
            {"blocks": [{"type": "tool_use", "name": SAMPLING_TOOL,
                         "input": {"prompt": "a haiku about rain", "maxTokens": 50}}], "usage": STEP},
            {"blocks": [{"type": "text", "text": "Sampled."}], "usage": STEP}]},
        {"when": {"input": "ask me", "tools": [ELICITATION_TOOL]}, "steps": [
            {"blocks": [{"type": "tool_use", "name": ELICITATION_TOOL, "input": {}}], "usage": STEP},
            {"blocks": [{"type": "text", "text": "{{last}}"}], "usage": STEP}]}],
    # a request that fits no reply: the tool it needed was not offered
    "steps": [{"blocks": [{"type": "text", "text": "NOT OFFERED: the server-everything tool this needs"}]}],
}


# -- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mcp_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ``mcpServers`` file naming server-everything (installed on first use) as ``everything``."""
    command, *args = servers.everything_server()
    path = tmp_path_factory.mktemp("everything") / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {SERVER: {"command": command, "args": args, "timeout": 60}}}))
    return path


@pytest.fixture(scope="module")
def mock(mock_url: str) -> MockHandle:
    return MockHandle(mock_url)


def _serve(workdir: Path, mock: MockHandle, config: Path, sampling: str) -> Iterator[Server]:
    workdir.mkdir(parents=True, exist_ok=True)
    srv = start_server(workdir, model="anthropic:" + mock.scenario(f"everything-serve-{sampling}", MODEL), env={
        "ANTHROPIC_BASE_URL": mock.base_url, "ANTHROPIC_API_KEY": "mock-key", "TURNSTREAM_MCP_CONFIG": str(config),
        "TURNSTREAM_MCP_SAMPLING": sampling})
    try:
        yield srv
    finally:
        srv.stop()
    # server-everything's stderr is in turnstream's log as its records (every line of it JSON), not as errors
    assert (SERVER, "Starting default (STDIO) server...") in mcp_stderr(srv)
    assert server_errors(srv) == []


@pytest.fixture(scope="module")
def serve_ask(tmp_path_factory: pytest.TempPathFactory, mock: MockHandle, mcp_config: Path) -> Iterator[Server]:
    """``turnstream serve`` with server-everything, sampling under ``ask`` (the default)."""
    yield from _serve(tmp_path_factory.mktemp("serve-ask"), mock, mcp_config, "ask")


@pytest.fixture(scope="module")
def serve_allow(tmp_path_factory: pytest.TempPathFactory, mock: MockHandle, mcp_config: Path) -> Iterator[Server]:
    """``turnstream serve`` with server-everything, sampling under ``allow``."""
    yield from _serve(tmp_path_factory.mktemp("serve-allow"), mock, mcp_config, "allow")


# -- helpers --------------------------------------------------------------------------------------

def blocks(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e.data["block"] for e in events if e.event == "block_stop" and e.data["block"]["type"] == kind]


def follow(c: Any, sid: str, answered: Any) -> list[Event]:
    """The rest of the turn that an answer posted to the tool-results route resumed."""
    assert answered.status_code == 200, answered.text
    last = answered.json()["last_event_id"]
    tid = last.rpartition(":")[0]
    with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": last}) as stream:
        return stream.rest()


def raw_result(text: str) -> dict[str, Any]:
    """The ``ElicitResult`` server-everything's elicitation tool says it received (``Raw result: {…}``)."""
    _, found, raw = text.partition("Raw result: ")
    assert found, text
    parsed: dict[str, Any] = json.loads(raw)
    return parsed


def sampling_result(text: str) -> dict[str, Any]:
    """The ``CreateMessageResult`` server-everything's sampling tool says it received."""
    head, _, raw = text.partition("\n")
    assert head == "LLM sampling result: ", text
    parsed: dict[str, Any] = json.loads(raw)
    return parsed


def sampling_requests(mock: MockHandle, model: str) -> list[dict[str, Any]]:
    """The requests turnstream sent the model for server-everything's sampling requests."""
    return [r for r in mock.requests(model) if "You are a helpful test server." in json.dumps(r.get("system"))]


def tool_results_read(mock: MockHandle, model: str) -> list[str]:
    """The text of every tool result the model read, in order."""
    out = []
    for body in mock.requests(model):
        last = body["messages"][-1]
        for block in last["content"] if isinstance(last["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                out.append(content if isinstance(content, str) else
                           "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict)))
    return out


# -- the installed server -------------------------------------------------------------------------

def test_the_server_is_the_pinned_version(mcp_config: Path) -> None:
    package = servers.HOME / "everything" / "node_modules" / "@modelcontextprotocol" / "server-everything"
    assert json.loads((package / "package.json").read_text())["version"] == VERSION
    lock = json.loads((servers.HERE / "everything" / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@modelcontextprotocol/server-everything"]["version"] == VERSION


# -- through turnstream serve ---------------------------------------------------------------------

def test_serve_progress_notifications_are_tool_progress_events_before_the_result(
        serve_ask: Server, mock: MockHandle) -> None:
    with serve_ask.client(timeout=60) as c:
        sid = new_session(c, toolset="none")
        events = run_turn(c, sid, "run the long operation")
    assert events[-1].data["status"] == "complete", events[-1].data
    offered = {t["name"] for t in mock.requests("everything-serve-ask")[-1]["tools"]}
    assert set(TOOLS) <= offered, offered
    call = next(b for b in blocks(events, "tool_use") if b["name"] == PROGRESS_TOOL)
    progress = [(e.data["tool_use_id"], e.data["progress"], e.data["total"])
                for e in events if e.event == "tool_progress"]
    call_id = call["tool_use_id"]
    assert progress == [(call_id, 1.0, 3.0), (call_id, 2.0, 3.0), (call_id, 3.0, 3.0)]
    names = [e.event if e.event != "block_stop" else e.data["block"]["type"] for e in events]
    assert max(i for i, n in enumerate(names) if n == "tool_progress") < names.index("tool_result")
    [result] = blocks(events, "tool_result")
    assert not result["is_error"]
    assert result["content"] == "Long running operation completed. Duration: 1.5 seconds, Steps: 3."


def test_serve_sampling_allowed_is_answered_by_the_sessions_model_and_metered(
        serve_allow: Server, mock: MockHandle) -> None:
    model = mock.scenario("everything-sampling-allow", MODEL)
    with serve_allow.client(timeout=60) as c:
        sid = new_session(c, toolset="none", model="anthropic:" + model)
        events = run_turn(c, sid, "use the model please")
    assert events[-1].data["status"] == "complete", events[-1].data
    assert not [e for e in events if e.event == "tool_request"]  # allow: nobody is asked
    [result] = blocks(events, "tool_result")
    assert not result["is_error"], result["content"]
    sampled = sampling_result(result["content"])
    assert sampled["role"] == "assistant" and sampled["stopReason"] == "endTurn"
    assert sampled["content"] == {"type": "text", "text": "rain drums on the tin roof"}
    _check_metered(events, result["tool_use_id"])
    [request] = sampling_requests(mock, model)
    assert not request.get("tools") and request["max_tokens"] == 50
    assert "Resource trigger-sampling-request context: a haiku about rain" in json.dumps(request["messages"])


def test_serve_sampling_under_ask_waits_for_approval_through_tool_results(
        serve_ask: Server, mock: MockHandle) -> None:
    model = mock.scenario("everything-sampling-ask", MODEL)
    with serve_ask.client(timeout=60) as c:
        sid = new_session(c, toolset="none", model="anthropic:" + model)
        events = run_turn(c, sid, "use the model please")
        assert events[-1].data["status"] == "awaiting_client", events[-1].data
        req = next(e.data for e in events if e.event == "tool_request")
        assert req["name"] == SAMPLING_TOOL
        asked = req["elicitation"]
        assert asked["message"] == (
            "The MCP server 'everything' asks to use the model (sampling, up to 50 tokens) (with a system prompt of "
            "30 characters): 'Resource trigger-sampling-request context: a haiku about rain'. Accept to let it, "
            "decline to refuse.")
        assert asked["requested_schema"] == {"type": "object", "properties": {}}
        assert sampling_requests(mock, model) == []  # not asked before the approval
        rest = follow(c, sid, c.post(f"/api/sessions/{sid}/tool-results",
                                     json={"tool_use_id": req["tool_use_id"], "content": "{}"}))
    assert rest[-1].data["status"] == "complete", rest[-1].data
    [result] = blocks(rest, "tool_result")
    assert sampling_result(result["content"])["content"]["text"] == "rain drums on the tin roof"
    _check_metered(rest, req["tool_use_id"])
    assert len(sampling_requests(mock, model)) == 1


def _check_metered(events: list[Event], tool_use_id: str) -> None:
    """The sampling call is a sub-step of step 1 (a usage event naming the call) and in the turn's usage."""
    subs = [(e.data["tool_use_id"], e.data["step"], e.data["usage"]["input_tokens"], e.data["usage"]["output_tokens"])
            for e in events if e.event == "usage" and "tool_use_id" in e.data]
    assert subs == [(tool_use_id, 1, SAMPLED["input_tokens"], SAMPLED["output_tokens"])]
    usage = events[-1].data["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (
        2 * STEP["input_tokens"] + SAMPLED["input_tokens"], 2 * STEP["output_tokens"] + SAMPLED["output_tokens"])


def test_serve_elicitation_answered_through_tool_results_reaches_the_server(
        serve_ask: Server, mock: MockHandle) -> None:
    model = mock.scenario("everything-elicit", MODEL)
    with serve_ask.client(timeout=60) as c:
        sid = new_session(c, toolset="none", model="anthropic:" + model)
        events = run_turn(c, sid, "ask me something")
        assert events[-1].data["status"] == "awaiting_client", events[-1].data
        req = next(e.data for e in events if e.event == "tool_request")
        assert req["name"] == ELICITATION_TOOL
        asked = req["elicitation"]
        assert asked["message"] == "Please provide inputs for the following fields:"
        schema = asked["requested_schema"]
        assert list(schema["properties"]) == [
            "name", "check", "firstLine", "email", "homepage", "birthdate", "integer", "number",
            "untitledSingleSelectEnum", "untitledMultipleSelectEnum", "titledSingleSelectEnum",
            "titledMultipleSelectEnum", "legacyTitledEnum"]
        assert schema["properties"]["untitledMultipleSelectEnum"]["type"] == "array"
        url = f"/api/sessions/{sid}/tool-results"
        # answers that break the server's schema never reach it
        for bad, field in (({"name": "Ann", "untitledMultipleSelectEnum": "Piano"}, "untitledMultipleSelectEnum"),
                           ({"name": "Ann", "untitledMultipleSelectEnum": []}, "untitledMultipleSelectEnum"),
                           ({"name": "Ann", "titledSingleSelectEnum": "hero-9"}, "titledSingleSelectEnum"),
                           ({"check": True}, "name"),
                           ({"name": "Ann", "integer": 500}, "integer"),  # maximum: 100
                           ({"name": "Ann", "email": "nope"}, "email"),  # format: email
                           ({"name": "Ann", "birthdate": "yesterday"}, "birthdate")):  # format: date
            r = c.post(url, json={"tool_use_id": req["tool_use_id"], "content": json.dumps(bad)})
            assert r.status_code == 422, (bad, r.status_code, r.text)
            assert field in r.text, (bad, r.text)
        answer = {"name": "Ann", "check": True, "integer": 7, "untitledMultipleSelectEnum": ["Piano", "Drums"],
                  "titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": ["fish-2", "fish-3"],
                  "legacyTitledEnum": "pet-2"}
        rest = follow(c, sid, c.post(url, json={"tool_use_id": req["tool_use_id"], "content": json.dumps(answer)}))
    assert rest[-1].data["status"] == "complete", rest[-1].data
    [result] = blocks(rest, "tool_result")
    assert not result["is_error"], result["content"]
    text = result["content"]
    assert text.startswith("✅ User provided the requested information!")
    for line in ("- Name: Ann", "- Agreed to terms: true", "- Favorite Integer: 7"):
        assert line in text, text
    assert raw_result(text) == {"action": "accept", "content": answer}
    assert blocks(rest, "text")[-1]["text"] == text  # the model read it


def test_serve_elicitation_declined_reaches_the_server_as_a_decline(serve_ask: Server, mock: MockHandle) -> None:
    model = mock.scenario("everything-elicit-decline", MODEL)
    with serve_ask.client(timeout=60) as c:
        sid = new_session(c, toolset="none", model="anthropic:" + model)
        events = run_turn(c, sid, "ask me something")
        req = next(e.data for e in events if e.event == "tool_request")
        rest = follow(c, sid, c.post(f"/api/sessions/{sid}/tool-results",
                                     json={"tool_use_id": req["tool_use_id"], "approved": False}))
    assert rest[-1].data["status"] == "complete", rest[-1].data
    [result] = blocks(rest, "tool_result")
    assert result["content"].startswith("❌ User declined to provide the requested information.")
    assert raw_result(result["content"]) == {"action": "decline"}


# -- through turnstream chat (a pty) --------------------------------------------------------------

def field(chat: Chat, label: str, hint: str, answer: str) -> None:
    """Wait for the field's prompt (its label, then what it takes in brackets) and type ``answer``."""
    chat.expect(re.escape(label) + r"\S*\s+\S*" + re.escape(f"({hint})"))
    chat.child.sendline(answer)


CHAT_ANSWER = {"name": "Ann", "check": True, "integer": 7, "untitledSingleSelectEnum": "Ross",
               "untitledMultipleSelectEnum": ["Piano", "Drums"], "titledSingleSelectEnum": "hero-3",
               "titledMultipleSelectEnum": ["fish-2", "fish-3"], "legacyTitledEnum": "pet-2"}
"""What ``progress_then_form`` types, as the server must receive it."""


def progress_then_form(chat: Chat) -> None:
    """The long operation's progress on the spinner line, each report in order, then the
    elicitation's thirteen fields answered at the prompt (the multi-selects by number and name,
    one bad choice, an email that is none and an integer past its maximum asked again), and the
    chat left."""
    chat.say("run the long operation")
    for share in ("1/3 (33%)", "2/3 (67%)", "3/3 (100%)"):
        chat.expect(re.escape(f"running tools… ⚙ {PROGRESS_TOOL} {share}"))
    chat.expect(re.escape("Finished: Long running operation completed. Duration: 1.5 seconds, Steps: 3."))

    chat.say("ask me something")
    chat.expect(re.escape(f"{ELICITATION_TOOL} asks:") + r".*Please provide inputs for the following fields:")
    field(chat, "String", "text", "Ann")
    field(chat, "Boolean", "y/n, optional", "y")
    field(chat, "String with default", "text, optional", "")
    field(chat, "String with email format", "text, optional", "nope")
    chat.expect(re.escape("String with email format: 'nope' is not a 'email'"))
    field(chat, "String with email format", "text, optional", "")
    field(chat, "String with uri format", "text, optional", "")
    field(chat, "String with date format", "text, optional", "")
    field(chat, "Integer", "whole number, optional", "500")
    chat.expect(re.escape("Integer: 500 is greater than the maximum of 100"))
    field(chat, "Integer", "whole number, optional", "7")
    field(chat, "Number in range 1-1000", "number, optional", "")
    field(chat, "Untitled Single Select Enum",
          "1 Monica / 2 Rachel / 3 Joey / 4 Chandler / 5 Ross / 6 Phoebe, optional", "Ross")
    multi = "1 Guitar / 2 Piano / 3 Violin / 4 Drums / 5 Bass; several, with commas, optional"
    field(chat, "Untitled Multiple Select Enum", multi, "2, Banjo")
    chat.expect(re.escape("Untitled Multiple Select Enum needs one of Guitar, Piano, Violin, Drums, Bass"))
    field(chat, "Untitled Multiple Select Enum", multi, "2, Drums")
    field(chat, "Titled Single Select Enum", "1 Superman / 2 Green Lantern / 3 Wonder Woman, optional", "3")
    field(chat, "Titled Multiple Select Enum", "1 Tuna / 2 Salmon / 3 Trout; several, with commas, optional",
          "Salmon, 3")
    field(chat, "Legacy Titled Single Select Enum", "1 Cats / 2 Dogs / 3 Birds / 4 Fish / 5 Reptiles, optional",
          "Dogs")
    chat.expect("answered")
    chat.expect("User provided the requested information!")
    chat.say("bye")  # the chat ends without asking the model
    assert chat.expect_exit() == 0


def chat_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TURNSTREAM_"))}
    env.update(TURNSTREAM_HOME=str(tmp_path / "home"), TERM="xterm", COLUMNS="200", **extra)
    return env


def spawn_chat(args: list[str], env: dict[str, str]) -> pexpect.spawn:
    return pexpect.spawn(str(BIN), ["chat", *args], env=env, encoding="utf-8", timeout=60, dimensions=(40, 200))


def test_chat_shows_progress_on_the_spinner_line_and_asks_the_elicitation_in_the_terminal(
        tmp_path: Path, mock: MockHandle, mcp_config: Path) -> None:
    """The local chat, running server-everything itself (``TURNSTREAM_MCP_CONFIG``)."""
    model = "anthropic:" + mock.scenario("everything-chat", MODEL)
    child = spawn_chat(["--model", model, "--root", str(tmp_path)], chat_env(
        tmp_path, ANTHROPIC_BASE_URL=mock.base_url, ANTHROPIC_API_KEY="mock-key",
        TURNSTREAM_MCP_CONFIG=str(mcp_config)))
    try:
        progress_then_form(Chat(child))
    finally:
        if child.isalive():
            child.terminate(force=True)
    *_, read = tool_results_read(mock, model)
    assert raw_result(read) == {"action": "accept", "content": CHAT_ANSWER}


def test_chat_in_server_mode_shows_the_servers_progress_and_answers_its_elicitation(
        tmp_path: Path, serve_ask: Server, mock: MockHandle) -> None:
    """``turnstream chat --server``: server-everything runs under ``turnstream serve``; its progress
    reaches the chat's spinner line over SSE, and the answer goes back through the tool-results route."""
    child = spawn_chat(["--server", serve_ask.url, "--key", serve_ask.key, "--root", str(tmp_path)],
                       chat_env(tmp_path))
    try:
        progress_then_form(Chat(child))
    finally:
        if child.isalive():
            child.terminate(force=True)
    *_, read = tool_results_read(mock, "everything-serve-ask")
    assert raw_result(read) == {"action": "accept", "content": CHAT_ANSWER}


def test_chat_approves_the_sampling_request_at_the_prompt(
        tmp_path: Path, mock: MockHandle, mcp_config: Path) -> None:
    model = "anthropic:" + mock.scenario("everything-chat-sampling", MODEL)
    child = spawn_chat(["--model", model, "--root", str(tmp_path)], chat_env(
        tmp_path, ANTHROPIC_BASE_URL=mock.base_url, ANTHROPIC_API_KEY="mock-key",
        TURNSTREAM_MCP_CONFIG=str(mcp_config)))
    try:
        chat = Chat(child)
        chat.say("use the model please")
        chat.expect(re.escape(f"{SAMPLING_TOOL} asks:") + r".*'everything' asks to use the model \(sampling, up to 50")
        chat.expect(r"accept\?.*\(y/n\)")
        child.sendline("y")
        chat.expect("accepted")
        chat.expect(re.escape(f"{SAMPLING_TOOL} used the model: 11 tokens in, 9 out"))
        chat.expect("Sampled.")
        chat.say("bye")
        assert chat.expect_exit() == 0
    finally:
        if child.isalive():
            child.terminate(force=True)
    *_, read = tool_results_read(mock, model)
    assert sampling_result(read)["content"]["text"] == "rain drums on the tin roof"
    assert len(sampling_requests(mock, model)) == 1
