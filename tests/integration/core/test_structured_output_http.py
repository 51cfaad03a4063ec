"""Structured answers (docs/structured-output.md) on all three wire formats against the mock
provider, whose validators check each API's structured-output option."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from tests.support.mock_provider import MockHandle
from tests.support.mock_provider import ProviderOf as Make
from turnstream import Agent
from turnstream.blocks import TextBlock
from turnstream.events import BlockDelta, ErrorEvent, StreamEvent, TurnComplete
from turnstream.providers.json_schema import anthropic_schema, openai_strict_schema
from turnstream.store import MemoryStore

FORMATS = ["anthropic", "openai", "openai-responses"]


class Forecast(BaseModel):
    city: str
    high: int
    summary: str


GOOD = '{"city": "Paris", "high": 21, "summary": "sunny, light wind from the west"}'
BAD = '{"city": "Paris", "high": "warm", "summary": "sunny"}'


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


def sent_schema(kind: str, model: type[BaseModel]) -> dict[str, Any]:
    """The schema each API is sent for ``model``: its pydantic schema in that API's subset."""
    schema = model.model_json_schema()
    return anthropic_schema(schema) if kind == "anthropic" else openai_strict_schema(schema)


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
        provider_of: Make, mock_provider: MockHandle, kind: str) -> None:
    p = provider_of(kind, answers(GOOD))
    agent = Agent(p, output=Forecast, store=MemoryStore())
    events = await collect(agent, "Weather in Paris?")
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "complete"
    (body,) = mock_provider.requests(p.model)
    fmt = option(kind, body)
    assert fmt["type"] == "json_schema" and fmt["schema"] == sent_schema(kind, Forecast)
    assert fmt["schema"]["additionalProperties"] is False
    if kind != "anthropic":
        assert fmt["name"] == "Forecast" and fmt["strict"] is True
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
async def test_an_invalid_answer_gets_one_repair_round(provider_of: Make, mock_provider: MockHandle, kind: str) -> None:
    p = provider_of(kind, answers(BAD, GOOD))
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
        provider_of: Make, mock_provider: MockHandle, kind: str) -> None:
    p = provider_of(kind, answers(BAD, '{"city": "Paris"'))
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


async def test_the_mock_refuses_a_malformed_output_option(provider_of: Make) -> None:
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
    assert anthropic_errors({"messages": msgs, "output_config": {"format": {"type": "json_schema", "schema": {
        **ok, "additionalProperties": False}}}}) is None
    assert openai_chat_errors({"messages": msgs, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": ok}}}) is None
    assert openai_responses_errors({"input": msgs, "text": {"format": {"type": "json_schema", "name": "x",
                                                                       "schema": ok}}}) is None


class Reading(BaseModel):
    celsius: float = Field(ge=-90, le=60)
    note: str | None = Field(default=None, max_length=80)


class Report(BaseModel):
    """A model with what pydantic writes and the APIs refuse as it is: bounds, lengths, a list
    of at least two, a nested model referred to with a description beside the reference."""

    city: str = Field(min_length=1)
    readings: list[Reading] = Field(min_length=2, description="one per hour")
    now: Reading = Field(description="the latest")
    unit: Literal["C", "F"] = "C"


REPORT = ('{"city": "Oslo", "readings": [{"celsius": 3.5, "note": null}, {"celsius": 4, "note": "windy"}], '
          '"now": {"celsius": 4, "note": null}, "unit": "C"}')
OUT_OF_RANGE = REPORT.replace('"celsius": 3.5', '"celsius": 300')


@pytest.mark.parametrize("kind", FORMATS)
async def test_a_schema_the_apis_refuse_as_pydantic_writes_it_is_sent_in_their_subset(
        provider_of: Make, mock_provider: MockHandle, kind: str) -> None:
    from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors

    p = provider_of(kind, answers(OUT_OF_RANGE, REPORT))
    agent = Agent(p, output=Report, store=MemoryStore())
    turn = await agent.run("Weather in Oslo?")
    # every request was accepted by the mock's copy of the API's rules, and the bound the API
    # was not sent is still enforced by the model's own validation: one repair round
    assert turn.status == "complete" and turn.steps == 2, turn.error
    first, second = mock_provider.requests(p.model)
    assert "less than or equal to 60" in last_user_text(kind, second)
    assert agent.output_of(turn, Report).readings[0].celsius == 3.5
    fmt = option(kind, first)
    assert fmt["schema"] == sent_schema(kind, Report)
    # the raw pydantic schema in the same request is what the API refuses
    raw = json.loads(json.dumps(first))
    raw_fmt = option(kind, raw)
    raw_fmt["schema"].clear()
    raw_fmt["schema"].update(Report.model_json_schema())
    if kind == "anthropic":
        assert "'additionalProperties' must be explicitly set to false" in (anthropic_errors(raw) or "")
    elif kind == "openai":
        assert "'additionalProperties' is required to be supplied" in (openai_chat_errors(raw) or "")
    else:
        assert "'additionalProperties' is required to be supplied" in (openai_responses_errors(raw) or "")
    await agent.aclose()


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Tally(BaseModel):
    counts: dict[str, int]


async def test_a_recursive_schema_fails_an_anthropic_turn_before_any_request(
        provider_of: Make, mock_provider: MockHandle) -> None:
    p = provider_of("anthropic", answers('{"name": "root", "children": []}'))
    agent = Agent(p, output=Node, store=MemoryStore())
    events = await collect(agent, "A tree, please")
    (error,) = [ev for ev in events if isinstance(ev, ErrorEvent)]
    assert "cannot be asked of Anthropic's structured outputs" in error.message and "recursive" in error.message
    assert not error.retryable
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "failed"
    assert mock_provider.requests(p.model) == []
    await agent.aclose()


@pytest.mark.parametrize("kind", ["openai", "openai-responses"])
async def test_openai_takes_a_recursive_schema_strict_and_a_free_mapping_not_strict(
        provider_of: Make, mock_provider: MockHandle, kind: str) -> None:
    p = provider_of(kind, answers('{"name": "root", "children": [{"name": "leaf", "children": []}]}'))
    agent = Agent(p, output=Node, store=MemoryStore())
    turn = await agent.run("A tree, please")
    assert turn.status == "complete", turn.error
    fmt = option(kind, mock_provider.requests(p.model)[0])
    assert fmt["strict"] is True and fmt["schema"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    await agent.aclose()

    p = provider_of(kind, answers('{"counts": {"a": 1}}'))
    agent = Agent(p, output=Tally, store=MemoryStore())
    turn = await agent.run("Count them")
    assert turn.status == "complete", turn.error
    fmt = option(kind, mock_provider.requests(p.model)[0])
    assert fmt["strict"] is False and fmt["schema"] == Tally.model_json_schema()
    await agent.aclose()
