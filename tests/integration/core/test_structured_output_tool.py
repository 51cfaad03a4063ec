"""Structured answers through an answer tool (``Agent(output=..., output_via="tool")``), on all
three wire formats against the mock provider, which checks each request as its API would: the
answer is the input of a ``final_answer`` call, streamed as that call's input, validated, with one
repair round (the invalid call's ``is_error`` result), and no structured-output option is sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tests.support.mock_provider import MockHandle
from tests.support.mock_provider import ProviderOf as Make
from turnstream import Agent, tool
from turnstream.blocks import ToolResultBlock, ToolUseBlock
from turnstream.events import BlockDelta, ErrorEvent, StreamEvent, TurnComplete
from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors
from turnstream.output import OUTPUT_TOOL, RECORDED
from turnstream.store import MemoryStore

FORMATS = ["anthropic", "openai", "openai-responses"]
VALIDATORS = {"anthropic": anthropic_errors, "openai": openai_chat_errors, "openai-responses": openai_responses_errors}


class Tally(BaseModel):
    """A shape no API's structured-output option takes as it is: a mapping with free keys."""

    city: str
    counts: dict[str, int]


GOOD = {"city": "Oslo", "counts": {"rain": 3, "sun": 1}}
BAD = {"city": "Oslo", "counts": {"rain": "often"}}


def answer(value: dict[str, Any]) -> dict[str, Any]:
    return {"blocks": [{"type": "tool_use", "name": OUTPUT_TOOL, "input": value}]}


def tool_names(kind: str, body: dict[str, Any]) -> list[str]:
    if kind == "openai":
        return [t["function"]["name"] for t in body.get("tools", [])]
    return [t["name"] for t in body.get("tools", [])]


def no_output_option(body: dict[str, Any]) -> bool:
    return "output_config" not in body and "response_format" not in body and "format" not in body.get("text", {})


@tool
def rain_days(city: str) -> int:
    """Days of rain this week in a city."""
    return 3


@pytest.mark.parametrize("kind", FORMATS)
async def test_the_answer_is_a_tool_call_streamed_and_validated(provider_of: Make, mock_provider: MockHandle,
                                                                kind: str) -> None:
    p = provider_of(kind, {"steps": [{"blocks": [{"type": "tool_use", "name": "rain_days", "input": {"city": "Oslo"}}]},
                              answer(GOOD)]})
    agent = Agent(p, tools=[rain_days], output=Tally, output_via="tool", store=MemoryStore())
    events: list[StreamEvent] = [ev async for ev in agent.stream("Tally Oslo's weather")]
    done = events[-1]
    assert isinstance(done, TurnComplete) and (done.status, done.stop_reason, done.steps) == (
        "complete", "end_turn", 2)
    first, second = mock_provider.requests(p.model)
    for body in (first, second):
        assert no_output_option(body) and tool_names(kind, body) == ["rain_days", OUTPUT_TOOL]
        assert VALIDATORS[kind](body) is None
    parses = [ev.input for ev in events if isinstance(ev, BlockDelta) and ev.partial_json is not None
              and isinstance(ev.input, dict) and "counts" in ev.input]
    assert parses and parses[-1] == GOOD  # the answer streams as the call's growing input
    turns = await agent.store.list_turns((await agent.store.list_sessions("local"))[0].id)
    assert agent.output_of(turns[0], Tally) == Tally.model_validate(GOOD)
    results = [b for b in turns[0].blocks if isinstance(b, ToolResultBlock)]
    assert [(r.content, r.is_error) for r in results] == [("3", False), (RECORDED, False)]
    await agent.aclose()


@pytest.mark.parametrize("kind", FORMATS)
async def test_an_invalid_answer_is_told_in_its_result_once(provider_of: Make, mock_provider: MockHandle,
                                                           kind: str) -> None:
    p = provider_of(kind, {"steps": [answer(BAD), answer(GOOD)]})
    agent = Agent(p, output=Tally, output_via="tool", store=MemoryStore())
    turn = await agent.run("Tally Oslo's weather")
    assert (turn.status, turn.steps) == ("complete", 2)
    results = [b for b in turn.blocks if isinstance(b, ToolResultBlock)]
    assert results[0].is_error and "counts.rain" in results[0].content and "integer" in results[0].content
    assert agent.output_of(turn, Tally).counts == {"rain": 3, "sun": 1}
    assert all(VALIDATORS[kind](b) is None for b in mock_provider.requests(p.model))
    await agent.aclose()


@pytest.mark.parametrize("kind", FORMATS)
async def test_a_second_invalid_answer_fails_the_turn(provider_of: Make, kind: str) -> None:
    p = provider_of(kind, {"steps": [answer(BAD), answer({"city": "Oslo"})]})
    agent = Agent(p, output=Tally, output_via="tool", store=MemoryStore())
    events = [ev async for ev in agent.stream("Tally Oslo's weather")]
    errors = [ev for ev in events if isinstance(ev, ErrorEvent)]
    assert len(errors) == 1 and errors[0].code == "output_invalid" and "counts" in errors[0].message
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "failed"
    await agent.aclose()


@pytest.mark.parametrize("kind", FORMATS)
async def test_an_answer_in_text_is_asked_again_through_the_tool(provider_of: Make, mock_provider: MockHandle,
                                                                 kind: str) -> None:
    # one scripted answer per user text message: the question, then the repair message
    said = {"blocks": [{"type": "text", "text": "It rains a lot in Oslo."}]}
    p = provider_of(kind, {"turns": [[said], [answer(GOOD)]]})
    agent = Agent(p, output=Tally, output_via="tool", store=MemoryStore())
    turn = await agent.run("Tally Oslo's weather")
    assert turn.status == "complete" and agent.output_of(turn, Tally).city == "Oslo"
    second = mock_provider.requests(p.model)[1]
    assert f"Call the {OUTPUT_TOOL} tool" in json.dumps(second)
    assert [b.name for b in turn.blocks if isinstance(b, ToolUseBlock)] == [OUTPUT_TOOL]
    await agent.aclose()
