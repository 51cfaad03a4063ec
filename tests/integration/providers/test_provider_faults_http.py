"""Every adapter, over real HTTP, against the mock provider's faults (SPEC §2, §9).

Each API (Anthropic Messages, Chat Completions, Responses) plays the same scenarios through
the real provider class pointed at the mock. Each fault ends the turn retried, restarted or
``failed`` with an ``error`` event; and since the mock refuses any request the real API would
refuse (with its exact message), every follow-up request is also proven valid.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.ui_stream import open_gate
from turnstream import Agent, ToolResultBlock, ToolUseBlock, tool
from turnstream.events import BlockDelta, ErrorEvent, StepRestart, StreamEvent, TurnComplete
from turnstream.limits import Limits
from turnstream.mock import anthropic_wire, openai_chat_wire, openai_responses_wire
from turnstream.mock.server import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES
from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Provider
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider
from turnstream.retry import RetryPolicy
from turnstream.scenarios.engine import RequestView, Scenario

APIS = ["anthropic", "openai", "openai-responses"]
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "openai-responses": "/v1/responses"}
VALIDATORS = {"anthropic": anthropic_errors, "openai": openai_chat_errors, "openai-responses": openai_responses_errors}
WIRES: dict[str, Any] = {"anthropic": anthropic_wire, "openai": openai_chat_wire,
                         "openai-responses": openai_responses_wire}

FORMATS = {"anthropic": ANTHROPIC, "openai": OPENAI_CHAT, "openai-responses": OPENAI_RESPONSES}

WEATHER: dict[str, Any] = {"fragment_size": 4, "steps": [
    {"blocks": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}],
     "usage": {"input_tokens": 30, "output_tokens": 12}},
    {"blocks": [{"type": "text", "text": "It is {{last}} in Paris."}],
     "usage": {"input_tokens": 50, "output_tokens": 9}},
]}

Make = Callable[[str, dict[str, Any]], Provider]


@pytest.fixture
async def make(mock_provider: MockHandle, scenario_name: str) -> AsyncIterator[Make]:
    """Register a scenario and return the real adapter for ``api``, pointed at the mock."""
    made: list[Provider] = []

    def build(api: str, spec: dict[str, Any]) -> Provider:
        name = mock_provider.scenario(f"{scenario_name}-{api}-{len(made)}", spec)
        p: Provider
        if api == "anthropic":
            p = AnthropicProvider(name, api_key="test-key", base_url=mock_provider.base_url)
        elif api == "openai":
            p = OpenAIChatProvider(name, api_key="test-key", base_url=mock_provider.base_url + "/v1")
        else:
            p = OpenAIResponsesProvider(name, api_key="test-key", base_url=mock_provider.base_url + "/v1")
        made.append(p)
        return p

    yield build
    for p in made:
        await p.aclose()


def limits(**kw: Any) -> Limits:
    return Limits(retry=RetryPolicy(base_delay=0.001, max_delay=0.01), **kw)


def weather_tool(calls: list[str]) -> Any:
    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return "sunny"

    return get_weather


def with_fault(fault: dict[str, Any], step: int = 0) -> dict[str, Any]:
    steps = [dict(s) for s in WEATHER["steps"]]
    steps[step] = {**steps[step], "fault": fault}
    return {**WEATHER, "steps": steps}


async def run(agent: Agent) -> tuple[list[StreamEvent], Any]:
    events = [ev async for ev in agent.stream("Weather in Paris?")]
    done = events[-1]
    assert isinstance(done, TurnComplete)
    turn = await agent.store.get_turn(done.turn_id)
    return events, turn


def requests_of(mock_provider: MockHandle, provider: Provider, api: str) -> list[dict[str, Any]]:
    got = [r for r in mock_provider.received() if r["path"] == PATHS[api] and r["body"].get("model") == provider.model]
    return [r["body"] for r in got]


def assert_clean_weather_turn(turn: Any, calls: list[str]) -> None:
    assert turn.status == "complete" and turn.stop_reason == "end_turn"
    kinds = [b.type for b in turn.blocks]
    assert kinds == ["text", "tool_use", "tool_result", "text"], "no duplicated or lost blocks"
    assert [b.seq for b in turn.blocks] == [0, 1, 2, 3]
    assert calls == ["Paris"], "the tool ran exactly once"
    assert turn.text == "It is sunny in Paris."


@pytest.mark.parametrize("api", APIS)
async def test_tool_loop(api: str, make: Make, mock_provider: MockHandle) -> None:
    calls: list[str] = []
    p = make(api, WEATHER)
    agent = Agent(p, tools=[weather_tool(calls)], limits=limits(max_steps=5))
    events, turn = await run(agent)
    assert_clean_weather_turn(turn, calls)
    call = next(b for b in turn.blocks if isinstance(b, ToolUseBlock))
    assert call.input == {"city": "Paris"} and call.raw_input == '{"city": "Paris"}'
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (80, 21)
    assert any(isinstance(e, BlockDelta) and e.partial_json for e in events), "arguments streamed live"
    sent = requests_of(mock_provider, p, api)
    assert len(sent) == 2
    assert all(VALIDATORS[api](body) is None for body in sent)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [529, 429, 503])
async def test_retryable_status_with_retry_after_is_retried(api: str, status: int, make: Make,
                                                            mock_provider: MockHandle) -> None:
    calls: list[str] = []
    p = make(api, with_fault({"kind": "status", "status": status, "retry_after": 0.01, "times": 2,
                              "error_type": "overloaded_error" if status == 529 else "rate_limit_error"}))
    _, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    assert_clean_weather_turn(turn, calls)
    assert len(requests_of(mock_provider, p, api)) == 4  # two refused, then the two steps


@pytest.mark.parametrize("api", APIS)
async def test_spend_limit_429_is_not_retried(api: str, make: Make, mock_provider: MockHandle) -> None:
    calls: list[str] = []
    quota = "You exceeded your current quota, please check your plan and billing details."
    p = make(api, with_fault({"kind": "status", "status": 429, "error_type": "insufficient_quota", "times": 9,
                              "message": quota}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    assert turn.status == "failed" and turn.stop_reason == "error"
    [err] = [e for e in events if isinstance(e, ErrorEvent)]
    assert (err.code, err.retryable) == ("provider_status", False)
    assert "quota" in err.message
    assert len(requests_of(mock_provider, p, api)) == 1
    assert calls == []


@pytest.mark.parametrize("api", APIS)
async def test_error_event_mid_stream_restarts_the_step(api: str, make: Make) -> None:
    calls: list[str] = []
    p = make(api, with_fault({"kind": "error_event", "after_events": 4, "error_type": "overloaded_error",
                              "message": "Overloaded"}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    restarts = [e for e in events if isinstance(e, StepRestart)]
    assert len(restarts) == 1 and restarts[0].step == 1
    assert "Overloaded" in restarts[0].reason
    assert_clean_weather_turn(turn, calls)


def _bytes_to_first_delta(api: str, model: str) -> int:
    """Where the first content delta of the WEATHER first step ends on ``api``'s wire (frames made
    with ids and a model name as long as the mock's)."""
    script = Scenario({"steps": WEATHER["steps"], "fragment_size": WEATHER["fragment_size"]})
    msg_id = FORMATS[api].msg_id()
    frames = WIRES[api].frames(script.script(RequestView(1, 0, [], "q")), msg_id=msg_id, model=model)
    marker = {"anthropic": b"text_delta", "openai": b'"content":"Let', "openai-responses": b"output_text.delta"}[api]
    i = next(k for k, f in enumerate(frames) if marker in f)
    return sum(len(f) for f in frames[: i + 1]) + 5


@pytest.mark.parametrize("api", APIS)
async def test_dropped_connection_restarts_the_step(api: str, make: Make) -> None:
    calls: list[str] = []
    model = make(api, WEATHER).model  # the next scenario's name has the same length
    p = make(api, with_fault({"kind": "drop", "after_bytes": _bytes_to_first_delta(api, model)}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    assert len([e for e in events if isinstance(e, StepRestart)]) == 1
    assert_clean_weather_turn(turn, calls)


@pytest.mark.parametrize("api", APIS)
async def test_malformed_chunk_restarts_the_step(api: str, make: Make) -> None:
    calls: list[str] = []
    p = make(api, with_fault({"kind": "malformed", "after_events": 4}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    [restart] = [e for e in events if isinstance(e, StepRestart)]
    assert "StreamBrokenError" in restart.reason
    assert_clean_weather_turn(turn, calls)


@pytest.mark.parametrize("api", APIS)
async def test_missing_final_event_restarts_the_step(api: str, make: Make) -> None:
    calls: list[str] = []
    p = make(api, with_fault({"kind": "truncate"}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    assert len([e for e in events if isinstance(e, StepRestart)]) == 1
    assert_clean_weather_turn(turn, calls)


@pytest.mark.parametrize("api", APIS)
async def test_stream_that_never_ends_properly_fails_the_turn_without_running_its_calls(
        api: str, make: Make, mock_provider: MockHandle) -> None:
    calls: list[str] = []
    p = make(api, with_fault({"kind": "truncate", "times": 99}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits(stream_restarts=2)))
    assert turn.status == "failed" and turn.stop_reason == "error"
    assert len([e for e in events if isinstance(e, StepRestart)]) == 2
    [err] = [e for e in events if isinstance(e, ErrorEvent)]
    assert err.code == "stream_broken"
    assert calls == [], "a tool call from a stream without its final event never runs"
    results = [b for b in turn.blocks if isinstance(b, ToolResultBlock)]
    assert all(r.is_error for r in results)
    assert len(requests_of(mock_provider, p, api)) == 3


@pytest.mark.parametrize("api", APIS)
async def test_slow_fragments_still_complete(api: str, make: Make) -> None:
    calls: list[str] = []
    p = make(api, with_fault({"kind": "slow", "delay_ms": 2}))
    events, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    assert not any(isinstance(e, StepRestart) for e in events)
    assert_clean_weather_turn(turn, calls)


@pytest.mark.parametrize("api", APIS)
async def test_step_limit_sends_tool_choice_none(api: str, make: Make, mock_provider: MockHandle) -> None:
    calls: list[str] = []
    loop_forever = {"steps": [WEATHER["steps"][0]], "fragment_size": 8}
    p = make(api, loop_forever)
    _, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits(max_steps=2)))
    assert turn.stop_reason == "max_steps"
    sent = requests_of(mock_provider, p, api)
    assert len(sent) == 3
    assert all(VALIDATORS[api](b) is None for b in sent)
    final = sent[-1]
    choice = final.get("tool_choice")
    assert choice in ({"type": "none"}, "none")


@pytest.mark.parametrize("api", APIS)
async def test_thinking_then_tool_call_round_trip(api: str, make: Make, mock_provider: MockHandle) -> None:
    # Anthropic thinking is replayed with its signature; a Responses reasoning item right before
    # its function call (with the call's item id); Chat reasoning_content is never sent back.
    calls: list[str] = []
    first = {"blocks": [{"type": "thinking", "thinking": "The user wants weather.", "signature": "sig-1"},
                        *WEATHER["steps"][0]["blocks"]]}
    p = make(api, {**WEATHER, "steps": [first, WEATHER["steps"][1]]})
    _, turn = await run(Agent(p, tools=[weather_tool(calls)], limits=limits()))
    assert turn.status == "complete" and calls == ["Paris"]
    assert [b.type for b in turn.blocks] == ["thinking", "text", "tool_use", "tool_result", "text"]
    follow_up = requests_of(mock_provider, p, api)[-1]
    assert VALIDATORS[api](follow_up) is None
    text = str(follow_up)
    if api == "anthropic":
        assert "sig-1" in text
    elif api == "openai-responses":
        kinds = [i["role"] if i["type"] == "message" and "id" not in i else i["type"] for i in follow_up["input"]]
        assert kinds[:4] == ["user", "reasoning", "message", "function_call"]
        assert follow_up["input"][2]["id"].startswith("msg_")
    else:
        assert "The user wants weather." not in text


@pytest.mark.parametrize("api", APIS)
async def test_a_gate_holds_the_stream_half_way_until_it_opens(api: str, make: Make, tmp_path: Path) -> None:
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    calls: list[str] = []
    gated = {**WEATHER, "steps": [{**WEATHER["steps"][0], "gate": {"after_events": 7, "fifo": str(fifo)}},
                                  WEATHER["steps"][1]]}
    agent = Agent(make(api, gated), tools=[weather_tool(calls)], limits=limits())
    events: list[StreamEvent] = []
    async with aclosing(agent.stream("Weather in Paris?")) as stream:
        async for ev in stream:
            events.append(ev)
            if isinstance(ev, BlockDelta) and ev.text:
                break  # the first text has come while the stream waits at the gate
        assert not calls and not any(isinstance(e, TurnComplete) for e in events)
        await asyncio.to_thread(open_gate, fifo)
        events += [ev async for ev in stream]
    assert isinstance(events[-1], TurnComplete) and events[-1].status == "complete"
    assert calls == ["Paris"]
