"""MCP tools in the loop: real MCP servers (tests/support/mcp_server.py, written with the
``mcp`` SDK) started by the tests, over stdio and streamable HTTP, driven by the mock
provider in each of the three wire formats."""

from __future__ import annotations

import asyncio
import base64
import itertools
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp_http import HttpServer
from tests.support.media import PDF, PNG
from tests.support.mock_provider import MockHandle
from turnstream import Agent, ToolResultBlock, ToolUseBlock
from turnstream.events import BlockStop, ToolRequest
from turnstream.mcp import MCPToolset
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Provider
from turnstream.providers.openai_chat import TOOL_IMAGES, OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider
from turnstream.store import MemoryStore

ROOT = Path(__file__).resolve().parents[3]
SERVER = ["-m", "tests.support.mcp_server"]
_names = itertools.count()


def call(name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": args or {}}


def text(value: str) -> dict[str, Any]:
    return {"blocks": [{"type": "text", "text": value}]}


def results(turn: Any) -> list[ToolResultBlock]:
    return [b for b in turn.blocks if isinstance(b, ToolResultBlock)]


FORMATS: dict[str, Callable[[str, str], Provider]] = {
    "anthropic": lambda name, base: AnthropicProvider(name, api_key="k", base_url=base),
    "openai-chat": lambda name, base: OpenAIChatProvider(name, api_key="k", base_url=base + "/v1"),
    "openai-responses": lambda name, base: OpenAIResponsesProvider(name, api_key="k", base_url=base + "/v1"),
}


@pytest.fixture
async def provider(mock_provider: MockHandle) -> AsyncIterator[Callable[..., Provider]]:
    """A provider playing the given steps in one of the three formats (closed after the test)."""
    made: list[Provider] = []

    def make(*steps: dict[str, Any], fmt: str = "anthropic") -> Provider:
        name = mock_provider.scenario(f"mcp-{next(_names)}", {"fragment_size": 7, "steps": list(steps)})
        made.append(FORMATS[fmt](name, mock_provider.base_url))
        return made[-1]

    yield make
    for p in made:
        await p.aclose()


@pytest.fixture
def stderr_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "mcp-stderr.log"
    yield path


_logs: list[Any] = []
STDIO_MODES = ["stdio", "stdio-2025"]
"""The test server speaking the 2026-07-28 protocol, and only the older ones (whose calls may
ask mid-call, so turnstream runs each in a task of its own: ``mcp/live.py``)."""


def stdio_server(log: Path, name: str = "t", *, timeout: float = 10, mode: str = "stdio", **kw: Any) -> MCPToolset:
    """The test server over stdio, its stderr appended to ``log`` (``mode="stdio-2025"``: it
    speaks only the protocol versions before 2026-07-28)."""
    stderr = log.open("a")
    _logs.append(stderr)
    return MCPToolset.stdio(name, sys.executable, [*SERVER, mode], cwd=str(ROOT), timeout=timeout,
                            stderr=stderr, **kw)


@pytest.fixture
async def toolsets() -> AsyncIterator[list[MCPToolset]]:
    made: list[MCPToolset] = []
    yield made
    for ts in made:
        await ts.aclose()
    while _logs:
        _logs.pop().close()


async def until(check: Callable[[], bool], timeout: float = 15) -> None:
    """Poll ``check`` without blocking the event loop (the call runs in it)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _from_data_url(kind: str, url: str) -> tuple[str, str, str]:
    head, _, data = url.removeprefix("data:").partition(",")
    return kind, head.removesuffix(";base64"), data


def media_sent(fmt: str, body: dict[str, Any], call_id: str) -> list[tuple[str, str, str]]:
    """(kind, media type, base64 data) of the media a request sends with the result of the
    call ``call_id``, read where that API takes them."""
    if fmt == "anthropic":
        result = next(b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
                      if b.get("type") == "tool_result" and b["tool_use_id"] == call_id)
        return [(b["type"], b["source"]["media_type"], b["source"]["data"]) for b in result["content"]
                if b["type"] != "text"]
    if fmt == "openai-chat":  # the tool message is text; a user message right after carries the media
        announce = {"type": "text", "text": TOOL_IMAGES.format(id=call_id)}
        parts = next(m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                     and announce in m["content"])
        found: list[tuple[str, str, str]] = []
        for part in parts[parts.index(announce) + 1:]:
            if part["type"] == "text":
                break
            found.append(_from_data_url("image", part["image_url"]["url"]) if part["type"] == "image_url"
                         else _from_data_url("document", part["file"]["file_data"]))
        return found
    output = next(i["output"] for i in body["input"]
                  if i.get("type") == "function_call_output" and i["call_id"] == call_id)
    return [_from_data_url("image", part["image_url"]) if part["type"] == "input_image"
            else _from_data_url("document", part["file_data"]) for part in output if part["type"] != "input_text"]


@pytest.mark.parametrize("fmt", list(FORMATS))
async def test_a_tool_loop_uses_stdio_and_http_servers_in_every_format(
        fmt: str, provider: Callable[..., Provider], stderr_log: Path, mock_provider: MockHandle, http_url: str,
        toolsets: list[MCPToolset]) -> None:
    local, remote = stdio_server(stderr_log, "local"), MCPToolset.http("remote", http_url, headers={"X-Test": "1"})
    toolsets += [local, remote]
    p = provider({"blocks": [call("local__add", {"a": 2, "b": 3}), call("remote__media")]},
                 {"blocks": [call("remote__add", {"a": 40, "b": 2}), call("local__fail")]},
                 text("sum {{results[0]}}"), fmt=fmt)
    turn = await Agent(p, tools=[local, remote]).run("go")
    assert turn.status == "complete", turn
    rs = results(turn)
    assert [r.is_error for r in rs] == [False, False, False, True]
    assert rs[0].content == "5" and rs[2].content == "42"
    assert rs[1].content.split("\n\n") == [
        "here you are", f"[image: image/png, {len(PNG)} bytes; attached]",
        f"[resource <file:///srv/summary.pdf>: application/pdf, {len(PDF)} bytes; attached]",
        "[resource link: report <file:///srv/report.pdf> (application/pdf): the full report]",
        "[audio: audio/wav, 44 bytes; not played to the model: no provider takes audio in a tool result]"]
    assert [(a.media_type, a.name) for a in rs[1].attachments] == [("image/png", None),
                                                                   ("application/pdf", "summary.pdf")]
    assert rs[3].content.startswith("MCPToolError: Error executing tool fail")
    # the image and the PDF reached the model in the shape its API takes in a tool result
    after_media = mock_provider.requests(p.model)[1]
    assert media_sent(fmt, after_media, rs[1].tool_use_id) == [("image", "image/png", b64(PNG)),
                                                              ("document", "application/pdf", b64(PDF))]
    # the provider saw both servers' tools under collision-free names, and the results (the
    # mock refuses any request the real API would refuse)
    body = mock_provider.requests(p.model)[-1]
    names = {t.get("name") or t.get("function", {}).get("name") for t in body["tools"]}
    assert {"local__add", "local__hang", "remote__add", "remote__greet"} <= names
    assert turn.text == "sum 5"


@pytest.mark.parametrize("mode", STDIO_MODES)
async def test_a_hanging_tool_times_out_and_the_server_is_still_usable(
        mode: str, provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, timeout=1, mode=mode)
    toolsets.append(server)
    p = provider({"blocks": [call("t__hang")]}, {"blocks": [call("t__add", {"a": 1, "b": 1})]}, text("ok"))
    agent = Agent(p, tools=[server])
    started = time.monotonic()
    turn = await agent.run("go")
    rs = results(turn)
    assert rs[0].is_error and rs[0].content == "Tool execution timed out after 1s"
    assert not rs[1].is_error and rs[1].content == "2"
    assert time.monotonic() - started < 8
    # the request was cancelled on the server, not left running
    await until(lambda: "hang: cancelled" in stderr_log.read_text())


@pytest.mark.parametrize("mode", STDIO_MODES)
async def test_cancelling_the_turn_cancels_the_mcp_call(
        mode: str, provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, timeout=60, mode=mode)
    toolsets.append(server)
    agent = Agent(provider({"blocks": [call("t__hang")]}, text("never")), tools=[server], store=MemoryStore())
    last = None
    async with aclosing(agent.stream("go")) as events:
        async for ev in events:
            last = ev
            if isinstance(ev, BlockStop) and isinstance(ev.block, ToolUseBlock):
                await until(lambda: "hang: started" in stderr_log.read_text())
                assert agent.cancel(ev.turn_id)
    assert last is not None and last.name == "turn_complete"
    turn = await agent.store.get_turn(last.turn_id)
    assert turn is not None and turn.status == "cancelled"
    assert results(turn)[0].is_error
    await until(lambda: "hang: cancelled" in stderr_log.read_text())
    again = await Agent(provider({"blocks": [call("t__add", {"a": 2, "b": 2})]}, text("{{last}}")),
                        tools=[server]).run("again")
    assert again.text == "4"


@pytest.mark.parametrize("mode", STDIO_MODES)
async def test_a_server_that_dies_mid_call_is_reported_and_started_again(
        mode: str, provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, mode=mode)
    toolsets.append(server)
    p = provider({"blocks": [call("t__pid")]}, {"blocks": [call("t__crash")]}, {"blocks": [call("t__pid")]},
                 text("done"))
    turn = await Agent(p, tools=[server]).run("go")
    first, crashed, second = results(turn)
    assert crashed.is_error and "stopped during the call; it is started again on the next call" in crashed.content
    assert not first.is_error and not second.is_error and first.content != second.content  # a new process
    assert turn.status == "complete"


async def test_the_tool_list_is_listed_again_when_the_server_says_it_changed(
        provider: Callable[..., Provider], stderr_log: Path, mock_provider: MockHandle,
        toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log)
    toolsets.append(server)
    p = provider({"blocks": [call("t__grow")]}, {"blocks": [call("t__extra")]}, text("{{last}}"))
    turn = await Agent(p, tools=[server]).run("go")
    assert [r.content for r in results(turn)] == ["grown", "extra!"]
    first, second = mock_provider.requests(p.model)[:2]
    assert "t__extra" not in {t["name"] for t in first["tools"]}
    assert "t__extra" in {t["name"] for t in second["tools"]}


async def test_allow_list_and_approval_apply_to_mcp_tools(
        provider: Callable[..., Provider], stderr_log: Path, mock_provider: MockHandle,
        toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, tools=["add"], requires_approval=True)
    toolsets.append(server)
    p = provider({"blocks": [call("t__add", {"a": 1, "b": 2})]}, text("{{last}}"))
    agent = Agent(p, tools=[server])
    turn = await agent.run("go")
    assert turn.status == "awaiting_client"
    assert [t["name"] for t in mock_provider.requests(p.model)[0]["tools"]] == ["t__add"]
    use = next(b for b in turn.blocks if isinstance(b, ToolUseBlock))
    assert await agent.submit(turn.id, use.tool_use_id, approved=True)
    done = await agent.resume(turn.id)
    assert done.text == "3"


async def elicit(agent: Agent) -> tuple[str, str, ToolRequest]:
    requests: list[ToolRequest] = []
    turn_id = ""
    async with aclosing(agent.stream("greet me")) as events:
        async for ev in events:
            turn_id = ev.turn_id
            if isinstance(ev, ToolRequest):
                requests.append(ev)
    [req] = requests
    return turn_id, req.tool_use_id, req


async def test_an_elicitation_pauses_the_turn_and_the_answer_resumes_the_call(
        provider: Callable[..., Provider], stderr_log: Path, http_url: str, toolsets: list[MCPToolset]) -> None:
    store = MemoryStore()
    p = provider({"blocks": [call("h__greet")]}, text("{{last}}"))
    first = MCPToolset.http("h", http_url)
    toolsets.append(first)
    turn_id, use_id, req = await elicit(Agent(p, tools=[first], store=store))
    assert req.elicitation is not None and req.elicitation["message"] == "What is your name?"
    assert req.elicitation["requested_schema"]["required"] == ["name"]
    assert not req.requires_approval and req.executor == "server"
    # this process's side restarts: a new agent and a new connection; the HTTP server kept
    # running, so the call it asked from goes on with the answer
    await first.aclose()
    second = MCPToolset.http("h", http_url)
    toolsets.append(second)
    agent = Agent(p, tools=[second], store=store)
    assert await agent.submit(turn_id, use_id, content='{"name": "Ann"}')
    turn = await agent.resume(turn_id)
    assert turn.status == "complete" and turn.text == "Hello, Ann!"


async def test_an_elicitation_answered_after_the_mcp_server_restarted_is_an_error_to_retry(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    store = MemoryStore()
    p = provider({"blocks": [call("t__greet")]}, text("{{last}}"))
    first = stdio_server(stderr_log)
    toolsets.append(first)
    turn_id, use_id, _ = await elicit(Agent(p, tools=[first], store=store))
    await first.aclose()  # the stdio server process ends with its connection
    second = stdio_server(stderr_log)
    toolsets.append(second)
    agent = Agent(p, tools=[second], store=store)
    assert await agent.submit(turn_id, use_id, content='{"name": "Ann"}')
    turn = await agent.resume(turn_id)
    [result] = results(turn)
    assert result.is_error and "no longer takes the answer" in result.content
    assert "call the tool again" in result.content
    assert turn.status == "complete"


async def test_a_declined_elicitation_reaches_the_server(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    store = MemoryStore()
    server = stdio_server(stderr_log)
    toolsets.append(server)
    agent = Agent(provider({"blocks": [call("t__greet")]}, text("{{last}}")), tools=[server], store=store)
    turn_id, use_id, _ = await elicit(agent)
    assert await agent.submit(turn_id, use_id, approved=False)
    turn = await agent.resume(turn_id)
    [result] = results(turn)
    assert result.is_error and "elicitation was decline" in result.content


# -- the same over streamable HTTP --------------------------------------------------------


async def test_a_hanging_http_tool_times_out_and_the_server_is_still_usable(
        provider: Callable[..., Provider], http_server: HttpServer, toolsets: list[MCPToolset]) -> None:
    server = MCPToolset.http("h", http_server.url, timeout=1)
    toolsets.append(server)
    p = provider({"blocks": [call("h__hang")]}, {"blocks": [call("h__add", {"a": 1, "b": 1})]}, text("ok"))
    started = time.monotonic()
    turn = await Agent(p, tools=[server]).run("go")
    rs = results(turn)
    assert rs[0].is_error and rs[0].content == "Tool execution timed out after 1s"
    assert not rs[1].is_error and rs[1].content == "2"
    assert time.monotonic() - started < 8
    await until(lambda: "hang: cancelled" in http_server.log.read_text())


async def test_cancelling_the_turn_cancels_the_http_mcp_call(
        provider: Callable[..., Provider], http_server: HttpServer, toolsets: list[MCPToolset]) -> None:
    server = MCPToolset.http("h", http_server.url, timeout=60)
    toolsets.append(server)
    agent = Agent(provider({"blocks": [call("h__hang")]}, text("never")), tools=[server], store=MemoryStore())
    last = None
    async with aclosing(agent.stream("go")) as events:
        async for ev in events:
            last = ev
            if isinstance(ev, BlockStop) and isinstance(ev.block, ToolUseBlock):
                await until(lambda: "hang: started" in http_server.log.read_text())
                assert agent.cancel(ev.turn_id)
    assert last is not None and last.name == "turn_complete"
    turn = await agent.store.get_turn(last.turn_id)
    assert turn is not None and turn.status == "cancelled"
    assert results(turn)[0].is_error
    await until(lambda: "hang: cancelled" in http_server.log.read_text())
    again = await Agent(provider({"blocks": [call("h__add", {"a": 2, "b": 2})]}, text("{{last}}")),
                        tools=[server]).run("again")
    assert again.text == "4"


async def test_an_http_server_killed_mid_call_is_reported_and_reached_again_once_back(
        provider: Callable[..., Provider], http_server: HttpServer, toolsets: list[MCPToolset]) -> None:
    server = MCPToolset.http("h", http_server.url, timeout=60)
    toolsets.append(server)
    agent = Agent(provider({"blocks": [call("h__hang")]}, {"blocks": [call("h__add", {"a": 1, "b": 2})]},
                           text("done")), tools=[server], store=MemoryStore())
    last = None
    async with aclosing(agent.stream("go")) as events:
        async for ev in events:
            last = ev
            if isinstance(ev, BlockStop) and isinstance(ev.block, ToolUseBlock) and ev.block.name == "h__hang":
                await until(lambda: "hang: started" in http_server.log.read_text())
                http_server.kill()
    assert last is not None and last.name == "turn_complete"
    turn = await agent.store.get_turn(last.turn_id)
    assert turn is not None and turn.status == "complete"
    killed, down = results(turn)
    # the call ends as soon as the connection breaks, not at its 60 s timeout
    assert killed.is_error and "'h' stopped during the call" in killed.content, killed.content
    assert down.is_error and "could not connect to the MCP server 'h'" in down.content, down.content
    http_server.start()  # the same URL again
    again = await Agent(provider({"blocks": [call("h__add", {"a": 2, "b": 2})]}, text("{{last}}")),
                        tools=[server]).run("again")
    assert again.text == "4"



# -- a question asked mid-call by a server on a protocol version before 2026-07-28 ---------


def asked(log: Path) -> list[str]:
    """What the server's ``ask`` tool got for an answer, in order (from its stderr)."""
    return [line.removeprefix("ask: ") for line in log.read_text().splitlines() if line.startswith("ask: ")]


async def test_a_question_asked_mid_call_is_held_open_while_the_turn_waits_and_the_answer_reaches_it(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    store = MemoryStore()
    server = stdio_server(stderr_log, "o", mode="stdio-2025")
    toolsets.append(server)
    agent = Agent(provider({"blocks": [call("o__ask")]}, text("{{last}}")), tools=[server], store=store)
    turn_id, use_id, req = await elicit(agent)
    paused = await store.get_turn(turn_id)
    assert paused is not None and paused.status == "awaiting_client"
    assert req.elicitation is not None and req.elicitation["message"] == "What is your name?"
    assert req.elicitation["requested_schema"]["required"] == ["name"]
    assert req.elicitation["requested_schema"]["properties"]["name"]["type"] == "string"
    assert req.elicitation["state"]["protocol"] == "2025-11-25"
    assert not req.requires_approval and req.executor == "server"
    # the held call does not block the server: another call goes through meanwhile
    other = await Agent(provider({"blocks": [call("o__add", {"a": 1, "b": 2})]}, text("{{last}}")),
                        tools=[server]).run("add")
    assert other.text == "3"
    assert asked(stderr_log) == []  # the server still waits for its answer
    assert await agent.submit(turn_id, use_id, content='{"name": "Ann"}')
    turn = await agent.resume(turn_id)
    assert turn.status == "complete" and turn.text == "Hello, Ann!"
    assert asked(stderr_log) == ["accept"]  # the one call, answered once


async def test_a_question_asked_mid_call_and_declined_reaches_the_server_as_a_decline(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, "o", mode="stdio-2025")
    toolsets.append(server)
    agent = Agent(provider({"blocks": [call("o__ask")]}, text("{{last}}")), tools=[server], store=MemoryStore())
    turn_id, use_id, _ = await elicit(agent)
    assert await agent.submit(turn_id, use_id, approved=False)
    turn = await agent.resume(turn_id)
    [result] = results(turn)
    assert not result.is_error and result.content == "No name (decline)."
    assert asked(stderr_log) == ["decline"]


async def test_a_question_asked_mid_call_cannot_be_carried_across_a_restart(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    store = MemoryStore()
    p = provider({"blocks": [call("o__ask")]}, text("{{last}}"))
    first = stdio_server(stderr_log, "o", mode="stdio-2025")
    toolsets.append(first)
    turn_id, use_id, _ = await elicit(Agent(p, tools=[first], store=store))
    await first.aclose()  # this side restarts: the held call goes with it
    assert asked(stderr_log) == ["cancel"]  # the server was told, not left waiting
    second = stdio_server(stderr_log, "o", mode="stdio-2025")
    toolsets.append(second)
    agent = Agent(p, tools=[second], store=store)
    assert await agent.submit(turn_id, use_id, content='{"name": "Ann"}')
    turn = await agent.resume(turn_id)
    [result] = results(turn)
    assert result.is_error and "the server's question could not be carried across the restart" in result.content
    assert "call the tool again" in result.content
    assert turn.status == "complete"
