"""Several agents in one session (docs/agents.md) over HTTP against the mock provider.

The mock refuses every request its provider would refuse (validate.py), so a turn that
completes proves that each request after a hand-off between providers was valid.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.mock_provider import ProviderOf as Make
from turnstream import Agent, tool
from turnstream.blocks import ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnstream.events import BlockStart, BlockStop, StepStart, StreamEvent, ToolRequest, TurnComplete
from turnstream.store import MemoryStore


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-of-{key}"


def call(name: str, args: dict[str, Any] | None = None, *, text: str = "", think: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if think:
        blocks.append({"type": "thinking", "thinking": think, "signature": f"sig-{think}"})
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.append({"type": "tool_use", "name": name, "input": args or {}})
    return {"blocks": blocks, "stop_reason": "tool_use"}


def say(text: str, think: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": think, "signature": f"sig-{think}"}] if think \
        else []
    return {"blocks": [*blocks, {"type": "text", "text": text}]}


@pytest.mark.parametrize("other", ["openai", "openai-responses"])
async def test_hand_off_mid_turn_from_anthropic_thinking_to_openai_and_back(
        provider_of: Make, mock_provider: MockHandle, other: str) -> None:
    # Step numbers count the assistant messages of the turn, whoever wrote them: A plays
    # steps 0 and 3, B steps 1 and 2.
    pa = provider_of("anthropic", {"fragment_size": 4, "steps": [
        call("transfer_to_b", text="Passing you to B.", think="a-plan"), say("unused"), say("unused"),
        say("A again, B found {{results[1]}}", think="a-late")]})
    b_think = "b-reasons" if other == "openai-responses" else ""
    pb = provider_of(other, {"fragment_size": 4, "steps": [
        say("unused"), call("lookup", {"key": "k1"}, think=b_think), call("transfer_to_a")]})
    b = Agent(pb, name="b", tools=[lookup], handoffs=["a"], system="You are B.")
    a = Agent(pa, name="a", handoffs=[b], thinking_budget=1024, system="You are A.", store=MemoryStore())
    events: list[StreamEvent] = []
    async for ev in a.stream("start"):
        events.append(ev)
    turn = (await a.store.list_turns((await a.store.list_sessions("local"))[0].id))[0]
    assert turn.status == "complete", turn.error
    assert turn.text == "A again, B found value-of-k1"
    # who produced each block, step by step
    by_step = {b_.step: b_.agent for b_ in turn.blocks}
    assert by_step == {1: "a", 2: "b", 3: "b", 4: "a"}
    results = [x for x in turn.blocks if isinstance(x, ToolResultBlock)]
    assert [r.agent for r in results] == ["a", "b", "b"]
    assert all(not r.is_error for r in results)
    assert [e.agent for e in events if isinstance(e, StepStart)] == ["a", "b", "b", "a"]
    assert all(e.agent for e in events if isinstance(e, BlockStart))
    assert all(e.block is not None and e.block.agent for e in events if isinstance(e, BlockStop))
    # what each provider was sent
    reqs_a = mock_provider.requests(pa.model)
    reqs_b = mock_provider.requests(pb.model)
    assert len(reqs_a) == 2 and len(reqs_b) == 2
    assert reqs_a[0]["thinking"]["budget_tokens"] == 1024 and [b["text"] for b in reqs_a[0]["system"]] == ["You are A."]
    assert [t["name"] for t in reqs_a[0]["tools"]] == ["transfer_to_b"]
    # back in the middle of a tool loop whose last call B made: no thinking for that step
    assert "thinking" not in reqs_a[1]
    sent_a = json.dumps(reqs_a[1])
    assert "sig-a-plan" in sent_a and "b-reasons" not in sent_a  # A's own thinking only
    for r in reqs_b:
        sent = json.dumps(r)
        assert "sig-a-plan" not in sent and "a-plan" not in sent  # no foreign thinking
    if other == "openai":
        assert reqs_b[0]["messages"][0] == {"role": "system", "content": "You are B."}
        names = [t["function"]["name"] for t in reqs_b[0]["tools"]]
    else:
        assert reqs_b[0]["instructions"] == "You are B."
        names = [t["name"] for t in reqs_b[0]["tools"]]
        assert "reasoning" in json.dumps(reqs_b[1]["input"])  # B's own reasoning goes back to B
    assert names == ["lookup", "transfer_to_a"]
    session = (await a.store.list_sessions("local"))[0]
    assert session.current_agent == "a"
    assert session.agents is not None and {x["name"] for x in session.agents} == {"a", "b"}
    thinking = [x for x in turn.blocks if isinstance(x, ThinkingBlock)]
    assert thinking and all(t.agent in ("a", "b") for t in thinking)
    await a.aclose()


async def test_hand_off_for_the_next_turn_lets_the_caller_finish(provider_of: Make, mock_provider: MockHandle) -> None:
    pa = provider_of("anthropic", {"turns": [[call("transfer_to_b"), say("B takes it from here.")]]})
    pb = provider_of("openai", {"turns": [[say("unused")], [say("B speaking.")]]})
    b = Agent(pb, name="b")
    a = Agent(pa, name="a", handoffs=[b], handoff="next_turn", store=MemoryStore())
    first = await a.run("one", session_id="s1")
    assert first.status == "complete" and first.text == "B takes it from here."
    assert {x.agent for x in first.blocks} == {"a"}
    session = await a.store.get_session("s1")
    assert session is not None and session.current_agent == "b"
    second = await a.run("two", session_id="s1")
    assert second.status == "complete" and second.text == "B speaking."
    assert {x.agent for x in second.blocks} == {"b"}
    assert len(mock_provider.requests(pb.model)) == 1
    await a.aclose()


async def test_a_hand_off_to_an_agent_not_allowed_is_an_unknown_tool(provider_of: Make) -> None:
    pa = provider_of("anthropic", {"steps": [call("transfer_to_c"), say("still A")]})
    pb = provider_of("openai", {"steps": [say("B")]})
    a = Agent(pa, name="a", handoffs=[Agent(pb, name="b")], store=MemoryStore())
    turn = await a.run("go")
    assert turn.status == "complete" and turn.text == "still A"
    result = next(x for x in turn.blocks if isinstance(x, ToolResultBlock))
    assert result.is_error and "transfer_to_c" in result.content
    assert {x.agent for x in turn.blocks} == {"a"}
    calls = [x for x in turn.blocks if isinstance(x, ToolUseBlock)]
    assert [c.name for c in calls] == ["transfer_to_c"]
    await a.aclose()


async def test_a_paused_turn_resumes_with_the_agent_a_hand_off_chose(
        provider_of: Make, mock_provider: MockHandle, tmp_path: Any) -> None:
    """A's step holds a hand-off and a call that waits for approval; the turn is resumed by
    other Agent objects (as another process would) over the same SQLite file: the next step
    runs as B, whose own call then waits too, and its resume goes on as B."""
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    pa = provider_of("anthropic", {"steps": [{"blocks": [
        {"type": "tool_use", "name": "transfer_to_b", "input": {}},
        {"type": "tool_use", "name": "delete", "input": {"path": "a.txt"}}], "stop_reason": "tool_use"},
        say("A should not speak again")]})
    pb = provider_of("openai-responses", {"steps": [say("unused"), call("delete", {"path": "b.txt"}),
                                             say("B done: {{last}}")]})
    db = f"sqlite:///{tmp_path / 'team.db'}"

    def team() -> Agent:
        b = Agent(pb, name="b", tools=[delete])
        return Agent(pa, name="a", tools=[delete], handoffs=[b], store=db, session_id="s")

    first = team()
    events = [ev async for ev in first.stream("tidy up")]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "awaiting_client"
    req = next(e for e in events if isinstance(e, ToolRequest))
    await first.store.aclose()

    second = team()
    await second.store.open()
    assert await second.submit(req.turn_id, req.tool_use_id, approved=True)
    events = [ev async for ev in second.resume_stream(req.turn_id)]
    assert [e.agent for e in events if isinstance(e, StepStart)] == ["b"]
    req_b = next(e for e in events if isinstance(e, ToolRequest))
    assert events[-1].status == "awaiting_client"  # type: ignore[union-attr]
    await second.store.aclose()

    third = team()
    await third.store.open()
    assert await third.submit(req_b.turn_id, req_b.tool_use_id, approved=True)
    turn = await third.resume(req_b.turn_id)
    assert turn.status == "complete" and turn.text == "B done: deleted"
    assert ran == ["a.txt", "b.txt"]
    assert [(b_.step, b_.agent) for b_ in turn.blocks if isinstance(b_, ToolUseBlock)] == [
        (1, "a"), (1, "a"), (2, "b")]
    assert {b_.agent for b_ in turn.blocks if b_.step == 3} == {"b"}
    assert len(mock_provider.requests(pa.model)) == 1
    await third.aclose()
