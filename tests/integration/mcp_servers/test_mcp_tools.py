"""MCP tools in the loop: real MCP servers (tests/support/mcp_server.py, written with the
``mcp`` SDK) started by the tests, over stdio and streamable HTTP, driven by the mock
provider in each of the three wire formats."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.processes import wait_for
from turnstream import Agent, ToolResultBlock, ToolUseBlock
from turnstream.events import BlockStop, ToolRequest
from turnstream.mcp import MCPToolset
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Provider
from turnstream.providers.openai_chat import OpenAIChatProvider
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


def stdio_server(log: Path, name: str = "t", *, timeout: float = 10, **kw: Any) -> MCPToolset:
    """The test server over stdio, its stderr appended to ``log``."""
    stderr = log.open("a")
    _logs.append(stderr)
    return MCPToolset.stdio(name, sys.executable, [*SERVER, "stdio"], cwd=str(ROOT), timeout=timeout,
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
    assert rs[1].content.startswith("here you are\n\n[image: image/png, 32 bytes;")
    assert "[resource link: report <file:///srv/report.pdf> (application/pdf): the full report]" in rs[1].content
    assert rs[3].content.startswith("MCPToolError: Error executing tool fail")
    # the provider saw both servers' tools under collision-free names, and the results (the
    # mock refuses any request the real API would refuse)
    body = mock_provider.requests(p.model)[-1]
    names = {t.get("name") or t.get("function", {}).get("name") for t in body["tools"]}
    assert {"local__add", "local__hang", "remote__add", "remote__greet"} <= names
    assert turn.text == "sum 5"


async def test_a_hanging_tool_times_out_and_the_server_is_still_usable(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, timeout=1)
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
    wait_for("the server to see the cancel", lambda: "hang: cancelled" in stderr_log.read_text(), 10)


async def test_cancelling_the_turn_cancels_the_mcp_call(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log, timeout=60)
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
    wait_for("the server to see the cancel", lambda: "hang: cancelled" in stderr_log.read_text(), 10)
    again = await Agent(provider({"blocks": [call("t__add", {"a": 2, "b": 2})]}, text("{{last}}")),
                        tools=[server]).run("again")
    assert again.text == "4"


async def test_a_server_that_dies_mid_call_is_reported_and_started_again(
        provider: Callable[..., Provider], stderr_log: Path, toolsets: list[MCPToolset]) -> None:
    server = stdio_server(stderr_log)
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
