"""Turns form a tree (docs/branches.md): what the model reads for a turn is the path from the
session's first turn to the turn's parent, and nothing of a sibling branch, whether the turn
starts, resumes after a client tool or is taken over after its process died."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.recording import Recording
from turnstream import branches
from turnstream.agent import Agent
from turnstream.blocks import TextBlock, ToolUseBlock, Turn
from turnstream.errors import InvalidValue, NotFound
from turnstream.lifecycle import submit_tool_result
from turnstream.loop import RunConfig, TurnRunner
from turnstream.providers.base import ModelRequest
from turnstream.store import MemoryStore, Store
from turnstream.store.sqlite import SQLiteStore
from turnstream.tools.tool import Tool, tool

ECHO = {"blocks": [{"type": "text", "text": "re: {{input}}"}]}
SPEC: dict[str, Any] = {
    "replies": [
        {"when": {"input": "^where"}, "steps": [{"blocks": [{"type": "tool_use", "name": "locate", "input": {}}]},
                                                 {"blocks": [{"type": "text", "text": "at {{last}}"}]}]},
        {"when": {"input": "^crash"}, "steps": [{"blocks": [{"type": "tool_use", "name": "fragile", "input": {}}]},
                                                 {"blocks": [{"type": "text", "text": "after {{last}}"}]}]}],
    "steps": [ECHO]}


def transcript(request: ModelRequest) -> list[tuple[str, str]]:
    """Each message of a request as (role, its text)."""
    out: list[tuple[str, str]] = []
    for m in request.messages:
        text = " ".join(b if isinstance(b, str) else b.text for b in m.blocks if isinstance(b, str | TextBlock))
        out.append((m.role, text))
    return out


def expected(path: list[str], last: str) -> list[tuple[str, str]]:
    """The messages of a turn whose path reads the inputs ``path`` and whose input is ``last``."""
    out: list[tuple[str, str]] = []
    for text in path:
        out += [("user", text), ("assistant", f"re: {text}")]
    return [*out, ("user", last)]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "t.db")
    await s.open()
    return s


async def test_each_branch_sends_its_own_path_and_nothing_of_the_others(store: Store) -> None:
    provider = Recording(SPEC)
    agent = Agent(provider, store=store)
    a1 = await agent.run("one")
    sid = a1.session_id
    a2 = await agent.run("two", session_id=sid)
    a3 = await agent.run("three", session_id=sid)
    # an edit of "two": a sibling of a2, then one more turn after it (the current leaf)
    b2 = await agent.run("two, edited", session_id=sid, parent_turn_id=a1.id)
    b3 = await agent.run("three on b", session_id=sid)
    # another answer to "two": a sibling of a2 and b2 with a2's input, then one more turn
    c2 = await agent.regenerate(a2.id)
    c3 = await agent.run("three on c", session_id=sid)
    assert (b2.parent_turn_id, b3.parent_turn_id) == (a1.id, b2.id)
    assert (c2.parent_turn_id, c2.input, c3.parent_turn_id) == (a1.id, "two", c2.id)
    sent = [transcript(r) for r in provider.requests]
    assert sent == [
        expected([], "one"), expected(["one"], "two"), expected(["one", "two"], "three"),
        expected(["one"], "two, edited"), expected(["one", "two, edited"], "three on b"),
        expected(["one"], "two"), expected(["one", "two"], "three on c")]
    assert [t.id for t in await agent.branches(a2.id)] == [a2.id, b2.id, c2.id]
    assert [t.id for t in await agent.branches(a3.id)] == [a3.id]
    session = await store.get_session(sid, with_turns=True)
    assert session is not None and session.current_leaf == c3.id
    assert [t.id for t in branches.path(session.turns, a3.id)] == [a1.id, a2.id, a3.id]


async def test_regenerating_the_first_turn_starts_a_new_first_turn(store: Store) -> None:
    provider = Recording(SPEC)
    agent = Agent(provider, store=store)
    first = await agent.run("one")
    await agent.run("two", session_id=first.session_id)
    again = await agent.regenerate(first.id)
    assert (again.parent_turn_id, again.input, again.text) == (None, "one", "re: one")
    assert transcript(provider.requests[-1]) == expected([], "one")
    assert [t.id for t in await agent.branches(first.id)] == [first.id, again.id]


async def test_a_parent_of_another_session_or_an_unknown_turn_is_refused(store: Store) -> None:
    agent = Agent(Recording(SPEC), store=store)
    here = await agent.run("one")
    there = await agent.run("elsewhere")
    with pytest.raises(InvalidValue) as refused:
        await agent.run("two", session_id=here.session_id, parent_turn_id=there.id)
    assert refused.value.field == "parent_turn_id"
    with pytest.raises(NotFound):
        await agent.regenerate("turn_missing")
    with pytest.raises(NotFound):
        await agent.branches("turn_missing")


async def side_branch(store: Store, provider: Recording, *tools: Tool) -> tuple[str, Turn, Turn]:
    """A session of "one", "two", and "two, edited" after "one" (the side branch): its id,
    the first turn and the edited one."""
    session = await store.create_session("u1")
    config = RunConfig(provider=provider, tools=list(tools))
    one = await TurnRunner(config, store).run(session.id, "one")
    await TurnRunner(config, store).run(session.id, "two")
    edited = await TurnRunner(config, store).run(session.id, "two, edited", parent_turn_id=one.id)
    return session.id, one, edited


async def test_a_turn_resumed_on_a_side_branch_reads_that_branch(store: Store) -> None:
    provider = Recording(SPEC)
    locate = Tool.client("locate")
    sid, one, edited = await side_branch(store, provider, locate)
    runner = TurnRunner(RunConfig(provider=provider, tools=[locate]), store)
    waiting = await runner.run(sid, "where now", parent_turn_id=one.id)
    assert waiting.status == "awaiting_client"
    pending = next(b for b in waiting.blocks if isinstance(b, ToolUseBlock))
    assert await submit_tool_result(store, waiting.id, pending.tool_use_id, content="Oslo")
    resumed = await TurnRunner(RunConfig(provider=provider, tools=[locate]), store).resume(waiting.id)
    assert (resumed.status, resumed.text) == ("complete", "at Oslo")
    assert transcript(provider.requests[-1])[:3] == expected(["one"], "where now")
    assert "two" not in str(transcript(provider.requests[-1]))
    assert edited.parent_turn_id == one.id


class Crash(BaseException):
    """The process dies while a tool runs."""


async def test_a_turn_taken_over_on_a_side_branch_reads_that_branch(store: Store) -> None:
    provider = Recording(SPEC)
    alive = False

    @tool(name="fragile", idempotent=True)
    def fragile() -> str:
        """Kills its process the first time."""
        if not alive:
            raise Crash
        return "survived"

    sid, _, edited = await side_branch(store, provider, fragile)
    with pytest.raises(BaseException):  # noqa: B017 - Crash, or a group of it from the calls' task group
        await TurnRunner(RunConfig(provider=provider, tools=[fragile]), store).run(
            sid, "crash here", parent_turn_id=edited.id)
    running = [t for t in await store.list_turns(sid) if t.status == "running"]
    assert len(running) == 1 and running[0].parent_turn_id == edited.id
    alive = True
    provider.requests.clear()
    done = await TurnRunner(RunConfig(provider=provider, tools=[fragile]), store).take_over(running[0].id)
    assert (done.status, done.text) == ("complete", "after survived")
    assert transcript(provider.requests[-1])[:5] == expected(["one", "two, edited"], "crash here")
    assert ("user", "two") not in transcript(provider.requests[-1])
