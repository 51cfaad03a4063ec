"""``turnstream chat --server`` in a real pseudo-terminal (SPEC §11, issue 7 point 5).

Three real processes: ``turnstream mock-provider`` (the model, over HTTP), ``turnstream
serve`` (the turn runs there, SQLite in tmp_path) and ``turnstream chat --server`` under
pexpect. The chat declares its local tools as client tools; the model calls ``read_file``;
the server pauses the turn; the chat reads the file *here*, posts the result by
``tool_use_id`` and follows the continuation. The mock's request log shows what reached
the provider: the file's content, and never the content of a file outside ``--root``.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pexpect
import pytest
from rich.console import Console

from tests.support import terminal
from tests.support.mock_provider import MockHandle
from tests.support.server import Server, run_turn, start_server
from tests.support.terminal import Chat
from turnstream.chat.remote import run_remote_chat

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")]

BIN = Path(sys.executable).parent / "turnstream"



@pytest.fixture(scope="module")
def server(mock_provider: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``turnstream serve`` on a free port (``--port 0``; the address is read from its output)."""
    workdir = tmp_path_factory.mktemp("serve")
    default = "anthropic:" + mock_provider.scenario(
        "remote-default", {"steps": [{"blocks": [{"type": "text", "text": "hello"}]}]})
    srv = start_server(workdir, model=default,
                       env={"ANTHROPIC_BASE_URL": mock_provider.base_url, "ANTHROPIC_API_KEY": "test-key"})
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "project"
    r.mkdir()
    (r / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    return r


@pytest.fixture
def start_chat(server: Server, root: Path, tmp_path: Path) -> Iterator[Any]:
    children: list[pexpect.spawn] = []

    def start(*extra: str, key: str | None = None) -> Chat:
        # No provider settings here: the model is the server's business.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TURNSTREAM_"))}
        env.update(TURNSTREAM_HOME=str(tmp_path / "home"), TERM="xterm", COLUMNS="200")
        args = ["chat", "--server", server.url, "--key", server.key if key is None else key,
                "--root", str(root), *extra]
        child = pexpect.spawn(str(BIN), args, env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
        children.append(child)
        return Chat(child)

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)


def _session(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as c:
        r = c.get(f"/api/sessions/{sid}")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body


def _session_id(chat: Chat) -> str:
    chat.expect(r"session (ses_[A-Za-z0-9_-]+)")
    match = chat.child.match
    assert match is not None and not isinstance(match, type)
    return str(match.group(1))


READ_SCENARIO: dict[str, Any] = {
    "fragment_size": 4,
    "turns": [
        [{"blocks": [{"type": "text", "text": "Let me read it."},
                     {"type": "tool_use", "name": "read_file", "input": {"path": "notes.txt"}}]},
         {"blocks": [{"type": "text", "text": "The file says: {{last}}"}]}],
        [{"blocks": [{"type": "tool_use", "name": "read_file", "input": {"path": "../secret.txt"}}]},
         {"blocks": [{"type": "text", "text": "Refused: {{last}}"}]}],
    ],
}


def test_a_client_tool_turn_runs_the_tool_here(mock_provider: MockHandle, server: Server, start_chat: Any) -> None:
    model = "anthropic:" + mock_provider.scenario("remote-read", READ_SCENARIO)
    chat = start_chat("--model", model)
    sid = _session_id(chat)
    chat.say("what do my notes say?")
    chat.expect("Let me read it.")
    chat.expect("read_file")
    chat.expect("remember the milk")  # the result, run here, echoed back by the server beneath the call
    chat.expect("The file says: remember the milk")

    chat.say("now read ../secret.txt")  # refused here, before anything is read
    chat.expect("outside the allowed directory")
    chat.expect("Refused: PathOutsideRootError:")
    chat.say("thanks, bye")
    chat.expect(f"--session {sid}")
    assert chat.expect_exit() == 0
    assert "Traceback" not in chat.seen

    sent = mock_provider.requests(model)
    assert len(sent) == 4  # two steps per turn; the farewell never reached the provider
    # The local tools were declared with their JSON Schemas.
    tools = {t["name"]: t for t in sent[0]["tools"]}
    assert set(tools) == {"list_directory", "read_file", "calculator"}
    assert tools["read_file"]["input_schema"]["required"] == ["path"]
    # The file's content reached the provider as the tool's result.
    first_results = [b for b in sent[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert len(first_results) == 1
    assert "remember the milk" in json.dumps(first_results[0]["content"])
    assert not first_results[0].get("is_error")
    # The escape went back as an error result, and the secret never left this machine.
    escape = [b for b in sent[3]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert escape and escape[0]["is_error"] is True
    assert "PathOutsideRootError: '../secret.txt' is outside the allowed directory" in json.dumps(escape[0])
    assert "TOP SECRET" not in json.dumps(sent)

    turns = _session(server, sid)["turns"]
    assert [(t["input"], t["status"]) for t in turns] == [
        ("what do my notes say?", "complete"), ("now read ../secret.txt", "complete")]
    results = [b for b in turns[0]["blocks"] if b["type"] == "tool_result"]
    assert results[0]["content"].startswith("remember the milk")


def test_ctrl_c_cancels_the_turn_on_the_server(mock_provider: MockHandle, server: Server, start_chat: Any) -> None:
    model = "anthropic:" + mock_provider.scenario("remote-slow", {
        "fragment_size": 5, "delay_ms": 30,
        "turns": [[{"blocks": [{"type": "text", "text": "Starting. " + "word " * 300}]}],
                  [{"blocks": [{"type": "text", "text": "Still here: {{input}}"}]}]],
    })
    chat = start_chat("--model", model)
    sid = _session_id(chat)
    chat.say("talk a lot")
    chat.expect("Starting.")
    chat.child.sendintr()
    chat.expect("cancelled")
    chat.say("are you there?")  # the session takes the next message: the server's turn was cancelled
    chat.expect("Still here: are you there?")
    chat.say("bye")
    assert chat.expect_exit() == 0
    turns = _session(server, sid)["turns"]
    assert [(t["input"], t["status"]) for t in turns] == [("talk a lot", "cancelled"),
                                                          ("are you there?", "complete")]


def test_a_resumed_session_answers_the_tool_calls_it_left_open(
    mock_provider: MockHandle, server: Server, start_chat: Any
) -> None:
    """The client stopped while the turn waited for its tool: ``--session`` picks it up."""
    model = "anthropic:" + mock_provider.scenario("remote-open", {
        "steps": [{"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "6 * 7"}}]},
                  {"blocks": [{"type": "text", "text": "It is {{last}}."}]}],
    })
    calculator = {"name": "calculator", "input_schema": {"type": "object", "properties": {
        "expression": {"type": "string"}}, "required": ["expression"]}}
    with server.client() as c:
        r = c.post("/api/sessions", json={"model": model, "toolset": "none"})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        events = run_turn(c, sid, "what is 6 times 7?", client_tools=[calculator])
        assert events[-1].data["status"] == "awaiting_client"

    chat = start_chat("--session", sid)
    chat.expect("what is 6 times 7")  # the history
    chat.expect("waits for 1 tool call")
    chat.expect("It is 42.")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert [t["status"] for t in _session(server, sid)["turns"]] == ["complete"]


def test_server_errors_are_one_clear_line(server: Server, start_chat: Any) -> None:
    bad_key = start_chat(key="not-a-key")
    bad_key.expect("refused the API key")
    assert bad_key.expect_exit() == 2
    assert "Traceback" not in bad_key.seen

    unknown = start_chat("--session", "ses_nope")
    unknown.expect(r"not found on the server \(404\)")
    assert unknown.expect_exit() == 2
    assert "Traceback" not in unknown.seen

    bad_model = start_chat("--model", "nope:thing")
    bad_model.expect(r"\(422\): body\.model")
    assert bad_model.expect_exit() == 2


def test_a_second_client_gets_a_clear_conflict(mock_provider: MockHandle, server: Server, start_chat: Any) -> None:
    """A message while another turn of the session is open: 409 as one line, the chat goes on."""
    model = "anthropic:" + mock_provider.scenario("remote-busy", {
        "steps": [{"blocks": [{"type": "tool_use", "name": "get_location", "input": {}}]},
                  {"blocks": [{"type": "text", "text": "Done."}]}],
    })
    with server.client() as c:
        sid = c.post("/api/sessions", json={"model": model, "toolset": "none"}).json()["id"]
        # Another client's tool keeps the turn open: not one this chat can run.
        events = run_turn(c, sid, "where am I?", client_tools=[{"name": "get_location"}])
        assert events[-1].data["status"] == "awaiting_client"
    chat = start_chat("--session", sid)
    chat.expect(r"waits for another client \(get_location\)")
    chat.say("hello?")
    chat.expect(r"conflict \(409\)")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert "Traceback" not in chat.seen


class _CuttingTransport(httpx.AsyncBaseTransport):
    """Real HTTP, except that the first ``cuts`` event streams break after their first bytes."""

    def __init__(self, cuts: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.left = cuts
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        self.paths.append(f"{request.method} {request.url.path} {request.headers.get('last-event-id', '')}")
        if self.left <= 0 or not request.headers.get("accept", "").startswith("text/event-stream"):
            return resp
        self.left -= 1
        assert isinstance(resp.stream, httpx.AsyncByteStream)
        body: httpx.AsyncByteStream = resp.stream

        class Cut(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in body:
                    yield chunk[:80]
                    raise httpx.ReadError("connection cut by the test")

            async def aclose(self) -> None:
                await body.aclose()

        return httpx.Response(resp.status_code, headers=resp.headers, stream=Cut(), extensions=resp.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_broken_event_stream_is_followed_from_the_last_id(
        mock_provider: MockHandle, server: Server, root: Path) -> None:
    """The POST's stream and the first follow both break mid-way: the client follows the turn
    again with Last-Event-ID and still runs the tool and shows the answer (in-process client,
    real server and mock)."""
    model = "anthropic:" + mock_provider.scenario("remote-cut", READ_SCENARIO)
    transport = _CuttingTransport(cuts=2)
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"what do my notes say?\nbye\n")
    os.close(write_fd)
    out = io.StringIO()
    with os.fdopen(read_fd, encoding="utf-8") as stdin:
        code = asyncio.run(run_remote_chat(server.url, server.key, root, model=model, stdin=stdin,
                                           console=Console(file=out, width=200), transport=transport))
    text = out.getvalue()
    assert code == 0, text
    assert "remember the milk" in text
    assert "The file says: remember the milk" in text
    assert "error" not in text
    follows = [p for p in transport.paths if p.startswith("GET") and "/events " in p]
    assert len(follows) >= 2, transport.paths
    # A follow sends the id of the last event seen (none when the cut came before the first
    # event: the turn's id came in the X-Turn-Id header, and the follow replays from the start).
    assert follows[-1].rpartition(" ")[2].startswith("turn_"), follows
    assert len(mock_provider.requests(model)) == 2


def test_server_tools_are_approved_here_and_shadowed_client_tools_left_out(
    mock_provider: MockHandle, server: Server, start_chat: Any
) -> None:
    """A notebook session: its own ``calculator`` wins over this client's (the 422 that says
    so is handled by leaving ours out), and its ``delete_cell`` asks y/n here."""
    step = [{"blocks": [{"type": "tool_use", "name": "delete_cell", "input": {"cell_id": "cell_missing"}}]},
            {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}]
    model = "anthropic:" + mock_provider.scenario("remote-approval", {"fragment_size": 8, "turns": [step] * 4})
    with server.client() as c:
        r = c.post("/api/sessions", json={"model": model, "toolset": "notebook"})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
    chat = start_chat("--session", sid)
    chat.say("delete that cell")
    chat.expect("calculator is a server tool in this session")
    chat.expect("Allow delete_cell")
    chat.expect(r"\[y/N/a: always in this session\]")
    chat.child.sendline("n")
    chat.expect("denied")
    chat.expect("Outcome: The user denied this tool call")
    chat.say("delete it after all")
    chat.expect(r"\[y/N/a")
    chat.child.sendline("y")
    chat.expect("allowed")
    chat.expect("Outcome: .*cell_missing")
    chat.say("and always")  # allowed for the rest of the session, on the server
    chat.expect(r"\[y/N/a")
    chat.child.sendline("a")
    chat.expect("always allowed in this session: delete_cell")
    chat.expect("Outcome: .*cell_missing")
    chat.say("without asking")
    chat.expect("Outcome: .*cell_missing")
    assert "Allow delete_cell" not in str(chat.child.before)
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert "Traceback" not in chat.seen
    declared = [{t["name"] for t in body["tools"]} for body in mock_provider.requests(model)]
    assert all("read_file" in names and "delete_cell" in names for names in declared)
    assert [t["status"] for t in _session(server, sid)["turns"]] == ["complete"] * 4


def test_a_line_typed_while_the_server_turn_runs_reaches_its_next_step(
        mock_provider: MockHandle, server: Server, start_chat: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    model = "anthropic:" + mock_provider.scenario("remote-steer-step", terminal.step_scenario(gate))
    chat = start_chat("--model", model)
    sid = _session_id(chat)

    def asked_once() -> None:  # "queued" was printed: the route answered 202 queued
        assert len(mock_provider.requests(model)) == 1

    terminal.type_while_held(chat, gate, "what is 6 * 7?", terminal.STEERED_LINE, asked_once)
    chat.expect(r"you, while it worked ›\S* use metric units")
    chat.expect("Done: 42")
    chat.say("bye")
    assert chat.expect_exit() == 0
    terminal.assert_read_by_the_next_step(mock_provider.requests(model))
    assert [(t["input"], t["status"]) for t in _session(server, sid)["turns"]] == [("what is 6 * 7?", "complete")]


def test_a_line_no_server_step_read_starts_the_next_turn_which_the_chat_follows(
        mock_provider: MockHandle, server: Server, start_chat: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    model = "anthropic:" + mock_provider.scenario("remote-steer-last", terminal.last_step_scenario(gate))
    chat = start_chat("--model", model)
    sid = _session_id(chat)
    terminal.type_while_held(chat, gate, "hello", terminal.LATE_LINE)
    chat.expect("not read by this turn, so the server starts the next one with it: and the weather\\?")
    chat.expect("Next turn: and the weather\\?")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert [(t["input"], t["status"]) for t in _session(server, sid)["turns"]] == [
        ("hello", "complete"), ("and the weather?", "complete")]
