"""A model call a running tool asks for (issue 27, item 9: what an MCP server's sampling
request becomes): ``ToolContext.sampler`` asks the turn's own model in a request of its own
(no tools, the tool's system prompt), adds its usage to the turn's, announces it as a sub-step
(a ``usage`` event with the call's ``tool_use_id``, the turn's cost counting it) and charges
it to the budgets beside the steps. Then the MCP side: what a sampling request may hold, and
the result it gets back. Driven by the scripted provider on a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as mt
import pytest

from turnstream import tool
from turnstream.blocks import Usage
from turnstream.errors import InvalidValue
from turnstream.events import StepUsage, StreamEvent
from turnstream.limits import Budgets, Ceiling, Limits
from turnstream.loop import RunConfig, TurnRunner
from turnstream.mcp.live import LiveCalls
from turnstream.mcp.sampling import DECLINED, question, result_of, turns_of
from turnstream.pricing import Price
from turnstream.providers.base import ModelRequest
from turnstream.providers.scripted import ScriptedProvider
from turnstream.retry import RetryPolicy
from turnstream.scenarios.engine import Scenario
from turnstream.store.sqlite import SQLiteStore
from turnstream.tools.sampler import Sampled, SampleTurn
from turnstream.tools.tool import ToolContext

MUSE = {"name": "muse",
        "replies": [{"when": {"input": "haiku about (?P<topic>\\w+)"}, "steps": [
            {"blocks": [{"type": "text", "text": "{{match.topic}} on the tin roof"}],
             "usage": {"input_tokens": 11, "output_tokens": 9}}]}],
        "steps": [{"blocks": [{"type": "tool_use", "name": "muse", "input": {"topic": "rain"}}],
                   "usage": {"input_tokens": 20, "output_tokens": 5}},
                  {"blocks": [{"type": "text", "text": "{{last}}"}],
                   "usage": {"input_tokens": 30, "output_tokens": 7}}]}
seen: list[ModelRequest] = []


class Recording(ScriptedProvider):
    def stream(self, request: ModelRequest) -> Any:
        seen.append(request)
        return super().stream(request)


@tool
async def muse(topic: str, ctx: ToolContext) -> str:
    """Asks the model for a haiku."""
    assert ctx.sampler is not None
    got = await ctx.sampler.complete(ctx.tool_use_id, [SampleTurn("user", f"Write a haiku about {topic}.")],
                                     system="You are a poet.", max_tokens=100_000)
    return f"{got.model} ({got.stop_reason}): {got.text}"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(str(tmp_path / "s.db"))
    await s.open()
    seen.clear()
    yield s
    await s.aclose()


async def test_a_tools_model_call_is_a_metered_sub_step_of_the_turn(store: SQLiteStore) -> None:
    prices = {"scripted:muse": Price(1000, 2000, 100, 1250, "test")}  # $1 a million tokens in, $2 out
    cfg = RunConfig(provider=Recording(Scenario(MUSE)), tools=[muse], prices=prices,
                    limits=Limits(max_tokens=64, retry=RetryPolicy(base_delay=0.0, max_delay=0.0),
                                  budgets=Budgets(turn=Ceiling(tokens=1_000_000))))
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    turn = await TurnRunner(cfg, store, on_event=events.append).run(session.id, "a poem please")
    assert turn.status == "complete"
    assert turn.blocks[-1].text == "scripted:muse (end_turn): rain on the tin roof"  # type: ignore[union-attr]
    # the model was asked three times: the step, the tool's own request (no tools, its system
    # prompt, max_tokens held to the turn's), the step after the result
    sampling = seen[1]
    assert (sampling.tools, sampling.system, sampling.max_tokens) == ([], "You are a poet.", 64)
    assert [m.role for m in sampling.messages] == ["user"]
    usages = [(e.step, e.tool_use_id, e.usage.input_tokens, e.cost_nano_usd, e.turn_cost_nano_usd)
              for e in events if isinstance(e, StepUsage)]
    call = turn.blocks[0].tool_use_id  # type: ignore[union-attr]
    assert usages == [(1, None, 20, 30_000, 30_000), (1, call, 11, 29_000, 59_000), (2, None, 30, 44_000, 103_000)]
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (61, 21)
    assert [u.input_tokens for u in turn.step_usage] == [20, 30]  # the steps alone
    spend = await store.budget_spend([f"turn:{turn.id}"])
    assert (spend[f"turn:{turn.id}"].tokens, spend[f"turn:{turn.id}"].nano_usd) == (25 + 20 + 37, 103_000)


def _params(*messages: mt.SamplingMessage, **more: Any) -> mt.CreateMessageRequestParams:
    return mt.CreateMessageRequestParams(messages=list(messages), max_tokens=50, **more)


def _text(role: str, text: str) -> mt.SamplingMessage:
    return mt.SamplingMessage(role=role, content=mt.TextContent(type="text", text=text))  # type: ignore[arg-type]


def test_a_request_is_passed_as_text_turns_and_anything_else_is_refused_naming_it() -> None:
    turns = turns_of(_params(_text("user", "hi"), _text("assistant", "hello"), mt.SamplingMessage(
        role="user", content=[mt.TextContent(type="text", text="a"), mt.TextContent(type="text", text="b")])))
    assert turns == [SampleTurn("user", "hi"), SampleTurn("assistant", "hello"), SampleTurn("user", "a\n\nb")]
    image = mt.SamplingMessage(role="user", content=mt.ImageContent(type="image", data="AA==", mime_type="image/png"))
    with pytest.raises(InvalidValue, match=r"messages\[1\] holds image content"):
        turns_of(_params(_text("user", "hi"), image))
    with pytest.raises(InvalidValue, match="tools"):
        turns_of(_params(_text("user", "hi"), tools=[mt.Tool(name="x", input_schema={"type": "object"})]))
    with pytest.raises(InvalidValue, match="no messages"):
        turns_of(_params())


def test_the_question_shows_what_the_server_sends_and_the_result_says_the_model() -> None:
    params = _params(_text("user", "x" * 1000), system_prompt="be brief")
    asked = question("srv", params, turns_of(params))
    assert asked.requested_schema == {"type": "object", "properties": {}}
    assert "'srv' asks to use the model (sampling, up to 50 tokens) (with a system prompt of 8 characters)" in (
        asked.message)
    assert "x" * 400 + "…" in asked.message and "x" * 401 not in asked.message
    result = result_of(Sampled("hi", "anthropic:claude", "max_tokens", Usage()))
    assert (result.role, result.model, result.stop_reason) == ("assistant", "anthropic:claude", "maxTokens")
    assert isinstance(result.content, mt.TextContent) and result.content.text == "hi"


async def test_a_request_is_refused_under_deny_unmatched_or_outside_a_turn() -> None:
    params = _params(_text("user", "hi"))
    denied = await LiveCalls("s", "deny").on_sample(None, params)  # type: ignore[arg-type]
    assert isinstance(denied, mt.ErrorData) and denied.code == DECLINED and "SAMPLING=deny" in denied.message
    live = LiveCalls("s", "allow")
    alone = await live.on_sample(None, params)  # type: ignore[arg-type]
    assert isinstance(alone, mt.ErrorData) and "matched to one running call" in alone.message
    live.start(asyncio.sleep(60), ToolContext("ses", "turn", "call"))  # type: ignore[arg-type]
    try:
        outside = await live.on_sample(None, params)  # type: ignore[arg-type]
        assert isinstance(outside, mt.ErrorData) and "no model to ask" in outside.message
    finally:
        live.close()
