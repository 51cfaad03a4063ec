"""A long conversation against the mock's small-window model (``mock-8k``), over real HTTP with
each API's adapter: old tool results are cleared from what is sent so every request fits
(the mock would refuse one that did not, with the API's own "too long" error), each clearing
is announced by a ``context_managed`` event, and the store keeps every result whole. A request
the estimate let through but the provider refused is fitted again and asked once more."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle, adapter
from turnstream import Agent, ToolResultBlock, tool
from turnstream.context.clearing import cleared_already
from turnstream.events import ContextManaged, StepRestart, StreamEvent, TurnComplete
from turnstream.limits import Limits
from turnstream.mock import context_rules
from turnstream.providers.base import Provider
from turnstream.retry import RetryPolicy

APIS = ["anthropic", "openai", "openai-responses"]
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "openai-responses": "/v1/responses"}
WINDOW = 8 * 1024

Make = Callable[[str, dict[str, Any]], Provider]


@pytest.fixture
async def make(mock_provider: MockHandle, scenario_name: str) -> AsyncIterator[Make]:
    made: list[Provider] = []

    def build(api: str, spec: dict[str, Any]) -> Provider:
        made.append(adapter(api, mock_provider.scenario(f"{scenario_name}-{api}-mock-8k", spec),
                            mock_provider.base_url))
        return made[-1]

    yield build
    for p in made:
        await p.aclose()


def limits(**kw: Any) -> Limits:
    return Limits(retry=RetryPolicy(base_delay=0.001, max_delay=0.01), max_tokens=1024, **kw)


def sent(mock_provider: MockHandle, p: Provider, api: str) -> list[dict[str, Any]]:
    return [r["body"] for r in mock_provider.received()
            if r["path"] == PATHS[api] and r["body"].get("model") == p.model]


def fits(body: dict[str, Any], api: str) -> bool:
    tokens = context_rules.request_tokens(body)
    return tokens + int(body.get("max_tokens") or 0) <= WINDOW if api == "anthropic" else tokens <= WINDOW


CELL = {"steps": [
    {"blocks": [{"type": "text", "text": "Running it."},
                {"type": "tool_use", "name": "run_cell", "input": {"code": "print(data)"}}]},
    {"blocks": [{"type": "text", "text": "The cell printed its data."}]},
]}


@pytest.mark.parametrize("api", APIS)
async def test_a_long_session_fits_every_request(api: str, make: Make, mock_provider: MockHandle,
                                                 scenario_name: str) -> None:
    outputs: list[str] = []

    @tool
    def run_cell(code: str) -> str:
        """Run a notebook cell."""
        out = f"cell {len(outputs)}: " + "0123456789 " * 600  # 6,600 characters
        outputs.append(out)
        return out

    p = make(api, CELL)
    agent = Agent(p, tools=[run_cell], limits=limits(max_steps=4), session_id=f"{scenario_name}-{api}")
    managed: list[ContextManaged] = []
    for i in range(10):
        events: list[StreamEvent] = [ev async for ev in agent.stream(f"run cell {i}")]
        done = events[-1]
        assert isinstance(done, TurnComplete) and done.status == "complete", done
        managed += [e for e in events if isinstance(e, ContextManaged)]
    bodies = sent(mock_provider, p, api)
    assert len(bodies) == 20, "no request was refused and asked again"
    assert all(fits(b, api) for b in bodies)
    assert managed and all(m.cleared and m.tokens_after < m.tokens_before and not m.retry for m in managed)
    assert all(m.window == WINDOW for m in managed)
    assert "[cleared to fit the model's context:" in json.dumps(bodies[-1])
    assert outputs[-1][:40] in json.dumps(bodies[-1]), "the newest result is sent whole"
    # the store keeps every result whole: replay, the audit trail and the chats read it
    turns = await agent.store.list_turns(agent.session_id or "")
    results = [b for t in turns for b in t.blocks if isinstance(b, ToolResultBlock)]
    assert [r.content for r in results] == outputs
    assert not any(cleared_already(r.content) for r in results)


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_request_is_fitted_again_once(api: str, make: Make, mock_provider: MockHandle,
                                                       scenario_name: str) -> None:
    """The estimate is calibrated on plain ASCII; a result in another script costs the mock (as
    a real tokenizer) more per character, so the request the estimate let through is refused
    as too long; the step clears the older result and is asked again, once."""
    spec = {"steps": [
        {"blocks": [{"type": "tool_use", "name": "read", "input": {"name": "ascii"}}]},
        {"blocks": [{"type": "tool_use", "name": "read", "input": {"name": "accented"}}]},
        {"blocks": [{"type": "tool_use", "name": "read", "input": {"name": "short"}}]},
        {"blocks": [{"type": "text", "text": "Read all three."}]},
    ]}
    texts = {"ascii": "a" * 10_000, "accented": "é" * 12_000, "short": "ok"}

    @tool
    def read(name: str) -> str:
        """Read a file."""
        return texts[name]

    p = make(api, spec)
    agent = Agent(p, tools=[read], limits=limits(max_steps=6, context_fraction=1.0),
                  session_id=f"{scenario_name}-{api}")
    events = [ev async for ev in agent.stream("read the three files")]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "complete", done
    retried = [e for e in events if isinstance(e, ContextManaged) and e.retry]
    assert len(retried) == 1 and retried[0].step == 3  # steps count from 1
    restarts = [e for e in events if isinstance(e, StepRestart)]
    assert [r.step for r in restarts] == [3] and "too long" in restarts[0].reason
    bodies = sent(mock_provider, p, api)
    assert len(bodies) == 5  # four steps, one asked twice
    assert not fits(bodies[2], api) and all(fits(b, api) for i, b in enumerate(bodies) if i != 2)
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None
    assert [b.content for b in turn.blocks if isinstance(b, ToolResultBlock)] == list(texts.values())


@pytest.mark.parametrize("api", APIS)
async def test_what_cannot_fit_fails_saying_so(api: str, make: Make, mock_provider: MockHandle,
                                               scenario_name: str) -> None:
    spec = {"steps": [{"blocks": [{"type": "text", "text": "never sent"}]}]}
    p = make(api, spec)
    agent = Agent(p, limits=limits(max_steps=2), session_id=f"{scenario_name}-{api}")
    events = [ev async for ev in agent.stream("é" * 40_000)]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "failed"
    errors = [e for e in events if e.name == "error"]
    assert errors and errors[-1].code == "context_too_long"  # type: ignore[union-attr]
    assert "too long for" in errors[-1].message and "new chat" in errors[-1].message  # type: ignore[union-attr]
    assert len(sent(mock_provider, p, api)) == 2, "asked once more, then given up"


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_request_is_retried_after_compaction(api: str, make: Make, mock_provider: MockHandle,
                                                              scenario_name: str) -> None:
    """No tool results to clear: the refused request is fitted again by summarising the first
    turn, and the retry succeeds."""
    spec = {"replies": [{"when": {"input": "^Summarise the conversation"},
                         "steps": [{"blocks": [{"type": "text", "text": "They sent a long line of a."}]}]}],
            "steps": [{"blocks": [{"type": "text", "text": "Noted."}]}]}
    p = make(api, spec)
    agent = Agent(p, limits=limits(max_steps=2, context_fraction=1.0), session_id=f"{scenario_name}-{api}")
    for message in ("a" * 8_000, "b" * 8_000):  # the estimate learns the rate of plain ASCII
        done = [ev async for ev in agent.stream(message)][-1]
        assert isinstance(done, TurnComplete) and done.status == "complete"
    events = [ev async for ev in agent.stream("é" * 9_000)]  # twice the bytes per character: refused
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "complete", done
    managed = [e for e in events if isinstance(e, ContextManaged)]
    assert len(managed) == 1 and managed[0].retry and managed[0].summarised == 1 and not managed[0].cleared
    bodies = sent(mock_provider, p, api)
    summary_requests = [b for b in bodies if "Summarise the conversation" in json.dumps(b)]
    assert len(summary_requests) == 1 and "a" * 1_000 in json.dumps(summary_requests[0])
    turn_requests = [b for b in bodies if b not in summary_requests]
    assert len(turn_requests) == 4 and not fits(turn_requests[2], api) and fits(turn_requests[3], api)
    assert "b" * 1_000 in json.dumps(turn_requests[3])  # the turn after the summary is sent as it was
    assert "a" * 1_000 not in json.dumps(turn_requests[3]) and "They sent a long line of a." in json.dumps(
        turn_requests[3])
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None and [b.type for b in turn.blocks] == ["compaction", "text"]
