"""Structured answers (docs/structured-output.md) on all three wire formats against the mock
provider, whose validators check each API's structured-output option."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from tests.support.mock_provider import MockHandle
from turnstream import Agent
from turnstream.blocks import TextBlock
from turnstream.events import BlockDelta, ErrorEvent, StreamEvent, TurnComplete
from turnstream.providers import Provider
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider
from turnstream.store import MemoryStore

FORMATS = ["anthropic", "openai", "openai-responses"]
Make = Callable[[str, dict[str, Any]], Provider]


class Forecast(BaseModel):
    city: str
    high: int
    summary: str


GOOD = '{"city": "Paris", "high": 21, "summary": "sunny, light wind from the west"}'
BAD = '{"city": "Paris", "high": "warm", "summary": "sunny"}'


@pytest.fixture
async def make(mock_provider: MockHandle, request: pytest.FixtureRequest) -> AsyncIterator[Make]:
    made: list[Provider] = []

    def build(kind: str, spec: dict[str, Any]) -> Provider:
        name = mock_provider.scenario(f"so-{request.node.name}-{len(made)}".replace("[", "-").replace("]", ""),
                                      spec)
        url = mock_provider.base_url
        p: Provider
        if kind == "anthropic":
            p = AnthropicProvider(name, api_key="k", base_url=url)
        elif kind == "openai":
            p = OpenAIChatProvider(name, api_key="k", base_url=url + "/v1")
        else:
            p = OpenAIResponsesProvider(name, api_key="k", base_url=url + "/v1")
        made.append(p)
        return p

    yield build
    for p in made:
        await p.aclose()


def answers(*texts: str) -> dict[str, Any]:
    """One scripted answer per user text message: the question, then the repair message."""
    return {"fragment_size": 5, "turns": [[{"blocks": [{"type": "text", "text": t}]}] for t in texts]}


def option(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """The structured-output option a request carried, in its API's shape."""
    if kind == "anthropic":
        fmt: dict[str, Any] = body["output_config"]["format"]
        return fmt
    if kind == "openai":
        assert body["response_format"]["type"] == "json_schema"
        spec: dict[str, Any] = body["response_format"]["json_schema"]
        return {"type": "json_schema", **spec}
    fmt = body["text"]["format"]
    return fmt


def last_user_text(kind: str, body: dict[str, Any]) -> str:
    if kind == "openai-responses":
        item = body["input"][-1]
        content = item["content"]
        return content if isinstance(content, str) else "".join(c["text"] for c in content)
    m = body["messages"][-1]
    assert m["role"] == "user"
    c = m["content"]
    return c if isinstance(c, str) else "".join(x.get("text", "") for x in c)


async def collect(agent: Agent, message: str) -> list[StreamEvent]:
    return [ev async for ev in agent.stream(message)]


@pytest.mark.parametrize("kind", FORMATS)
async def test_an_answer_is_streamed_as_partial_objects_and_validated(
        make: Make, mock_provider: MockHandle, kind: str) -> None:
    p = make(kind, answers(GOOD))
    agent = Agent(p, output=Forecast, store=MemoryStore())
    events = await collect(agent, "Weather in Paris?")
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "complete"
    (body,) = mock_provider.requests(p.model)
    fmt = option(kind, body)
    assert fmt["type"] == "json_schema" and fmt["schema"] == Forecast.model_json_schema()
    if kind != "anthropic":
        assert fmt["name"] == "Forecast"
    partials = [ev.output for ev in events if isinstance(ev, BlockDelta) and ev.output is not None]
    assert len(partials) >= 3
    assert partials[-1] == json.loads(GOOD)
    # the parses grow: each one's fields are a prefix of the final object's
    assert any(x == {"city": "Paris"} or x == {"city": "Par"} for x in partials)
    assert all(set(x) <= set(Forecast.model_fields) for x in partials if isinstance(x, dict))
    turns = await agent.store.list_turns((await agent.store.list_sessions("local"))[0].id)
    assert agent.output_of(turns[0], Forecast) == Forecast.model_validate_json(GOOD)
    await agent.aclose()


@pytest.mark.parametrize("kind", FORMATS)
async def test_an_invalid_answer_gets_one_repair_round(make: Make, mock_provider: MockHandle, kind: str) -> None:
    p = make(kind, answers(BAD, GOOD))
    agent = Agent(p, output=Forecast, store=MemoryStore())
    turn = await agent.run("Weather in Paris?")
    assert turn.status == "complete" and turn.steps == 2
    assert agent.output_of(turn, Forecast).high == 21
    texts = [b.text for b in turn.blocks if isinstance(b, TextBlock)]
    assert texts == [BAD, GOOD]  # the failed answer is kept
    first, second = mock_provider.requests(p.model)
    said = last_user_text(kind, second)
    assert "not a valid Forecast" in said and "high" in said and "integer" in said
    assert option(kind, second) == option(kind, first)
    assert json.dumps(BAD)[1:-1] in json.dumps(second)  # the model sees what it answered
    await agent.aclose()


@pytest.mark.parametrize("kind", FORMATS)
async def test_a_second_invalid_answer_fails_the_turn_with_the_error(
        make: Make, mock_provider: MockHandle, kind: str) -> None:
    p = make(kind, answers(BAD, '{"city": "Paris"'))
    agent = Agent(p, output=Forecast, store=MemoryStore())
    events = await collect(agent, "Weather in Paris?")
    errors = [ev for ev in events if isinstance(ev, ErrorEvent)]
    assert len(errors) == 1 and errors[0].code == "output_invalid"
    assert errors[0].message.startswith("Invalid JSON: EOF while parsing")
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "failed"
    turns = await agent.store.list_turns((await agent.store.list_sessions("local"))[0].id)
    assert turns[0].status == "failed" and turns[0].error
    assert [b.text for b in turns[0].blocks if isinstance(b, TextBlock)] == [BAD, '{"city": "Paris"']
    assert len(mock_provider.requests(p.model)) == 2
    await agent.aclose()


async def test_the_mock_refuses_a_malformed_output_option(make: Make) -> None:
    from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors

    msgs = [{"role": "user", "content": "hi"}]
    assert anthropic_errors({"messages": msgs, "output_config": {"format": {"type": "json"}}})
    assert anthropic_errors({"messages": msgs, "output_config": {"format": {"type": "json_schema",
                                                                            "schema": {"type": "array"}}}})
    assert openai_chat_errors({"messages": msgs, "response_format": {"type": "json_schema",
                                                                      "json_schema": {"name": "a b", "schema": {}}}})
    assert openai_responses_errors({"input": msgs, "text": {"format": {"type": "json_schema",
                                                                       "schema": {"type": "object"}}}})
    ok = {"type": "object", "properties": {}}
    assert anthropic_errors({"messages": msgs, "output_config": {"format": {"type": "json_schema", "schema": ok}}}) \
        is None
    assert openai_chat_errors({"messages": msgs, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": ok}}}) is None
    assert openai_responses_errors({"input": msgs, "text": {"format": {"type": "json_schema", "name": "x",
                                                                       "schema": ok}}}) is None
