"""Budgets in the loop: a runaway turn stops at its ceiling and asks, approving goes on
without counting a step twice, denying (or ``on_limit="answer"``) ends with a tools-off
answer; session and user-day ceilings span turns and sessions; the warning comes once.
Driven by the scripted provider on a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from turnstream import tool
from turnstream.blocks import ToolResultBlock, Turn, Usage
from turnstream.budgets import ANSWER_NOW, BUDGET_SPENT
from turnstream.events import BudgetWarning, StepUsage, StreamEvent, ToolRequest
from turnstream.lifecycle import BUDGET_DECLINED, submit_tool_result
from turnstream.limits import Budgets, Ceiling, Limits, usd
from turnstream.loop import RunConfig, TurnRunner
from turnstream.pricing import Price
from turnstream.providers.scripted import ScriptedProvider
from turnstream.retry import RetryPolicy
from turnstream.scenarios.engine import Scenario
from turnstream.store.protocol import Store
from turnstream.store.sqlite import SQLiteStore

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0)
RUNAWAY = {"name": "runaway", "steps": [
    {"blocks": [{"type": "tool_use", "name": "echo", "input": {"value": "x{{last}}"}}],
     "usage": {"input_tokens": 15, "output_tokens": 5}}]}
"""A model that never stops calling a tool: 20 tokens a step."""

ran: list[str] = []


@tool
def echo(value: str) -> str:
    """Echo a value."""
    ran.append(value)
    return value[:8]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = SQLiteStore(str(tmp_path / "b.db"))
    await s.open()
    ran.clear()
    yield s
    await s.aclose()


def config(budgets: Budgets, *, spec: dict[str, Any] = RUNAWAY, prices: dict[str, Price] | None = None) -> RunConfig:
    extra: dict[str, Any] = {"prices": prices} if prices is not None else {}
    return RunConfig(provider=ScriptedProvider(Scenario(spec)), tools=[echo],
                     limits=Limits(max_steps=40, retry=FAST, budgets=budgets), **extra)


async def start(store: Store, cfg: RunConfig, session_id: str, events: list[StreamEvent]) -> Turn:
    return await TurnRunner(cfg, store, on_event=events.append).run(session_id, "go")


async def resume(store: Store, cfg: RunConfig, turn_id: str, events: list[StreamEvent]) -> Turn:
    return await TurnRunner(cfg, store, on_event=events.append).resume(turn_id)


def requests(events: list[StreamEvent]) -> list[ToolRequest]:
    return [e for e in events if isinstance(e, ToolRequest)]


async def spent(store: Store, scope: str) -> int:
    return (await store.budget_spend([scope]))[scope].tokens


async def test_a_runaway_turn_pauses_at_its_ceiling_and_approving_goes_on_without_double_counting(
        store: Store) -> None:
    cfg = config(Budgets(turn=Ceiling(tokens=100)))
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    turn = await start(store, cfg, session.id, events)
    assert (turn.status, turn.stop_reason, turn.steps) == ("awaiting_client", "awaiting_client", 5)
    assert len(ran) == 4  # the fifth step's call waits
    (req,) = requests(events)
    assert req.requires_approval and req.budget is not None
    assert (req.budget.scope, req.budget.spent_tokens, req.budget.limit_tokens, req.budget.extra_tokens) == (
        "turn", 100, 100, 100)
    assert req.note is not None and "100 tokens" in req.note and "another 100 tokens" in req.note
    assert await spent(store, f"turn:{turn.id}") == 100

    assert await submit_tool_result(store, turn.id, req.tool_use_id, approved=True)
    events.clear()
    turn = await resume(store, cfg, turn.id, events)
    assert (turn.status, turn.steps, len(ran)) == ("awaiting_client", 10, 9)  # the approved call ran, 4 more
    assert await spent(store, f"turn:{turn.id}") == 200 == 20 * turn.steps  # each step counted once
    assert [e.step for e in events if isinstance(e, StepUsage)] == [6, 7, 8, 9, 10]
    assert sum(u.input_tokens + u.output_tokens for u in turn.step_usage) == 200
    assert requests(events)[-1].budget is not None


async def test_denying_ends_the_turn_with_a_tools_off_answer(store: Store) -> None:
    cfg = config(Budgets(turn=Ceiling(tokens=40)))
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    turn = await start(store, cfg, session.id, events)
    (req,) = requests(events)
    assert await submit_tool_result(store, turn.id, req.tool_use_id, approved=False, reason="too dear")
    turn = await resume(store, cfg, turn.id, events)
    assert (turn.status, turn.stop_reason, turn.steps, len(ran)) == ("complete", "budget", 3, 1)
    denied = next(b for b in turn.blocks if isinstance(b, ToolResultBlock) and b.tool_use_id == req.tool_use_id)
    assert denied.is_error and denied.content.startswith(BUDGET_DECLINED) and "too dear" in denied.content
    # The scripted model calls a tool even with tools off; that call is answered, not run.
    assert [b.content for b in turn.blocks if isinstance(b, ToolResultBlock)][-1] == BUDGET_SPENT
    assert await spent(store, f"turn:{turn.id}") == 60  # the answering step is counted too


async def test_by_setting_a_reached_ceiling_ends_with_a_tools_off_answer(store: Store) -> None:
    cfg = config(Budgets(turn=Ceiling(tokens=60), on_limit="answer"))
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    turn = await start(store, cfg, session.id, events)
    assert (turn.status, turn.stop_reason, turn.steps, len(ran)) == ("complete", "budget", 4, 2)
    assert not requests(events)
    contents = [b.content for b in turn.blocks if isinstance(b, ToolResultBlock)]
    assert contents[2] == ANSWER_NOW.format(what="this turn", spent="60 tokens", limit="60 tokens")
    assert contents[3] == BUDGET_SPENT  # the tools-off step's call (the scripted model ignores tool_choice)


async def test_a_session_ceiling_spans_its_turns_and_a_user_day_spans_sessions(store: Store) -> None:
    cfg = config(Budgets(session=Ceiling(tokens=100), user_day=Ceiling(tokens=160)))
    s1 = await store.create_session("u1")
    events: list[StreamEvent] = []
    first = await start(store, cfg, s1.id, events)
    assert first.steps == 5 and requests(events)[-1].budget.scope == "session"  # type: ignore[union-attr]
    assert await submit_tool_result(store, first.id, requests(events)[-1].tool_use_id, approved=False)
    first = await resume(store, cfg, first.id, events)  # one tools-off step more: 120 in the session
    s2 = await store.create_session("u1")
    events.clear()
    second = await start(store, cfg, s2.id, events)
    (req,) = requests(events)
    assert req.budget is not None and (req.budget.scope, req.budget.spent_tokens) == ("user_day", 160)
    assert second.steps == 2
    other = await store.create_session("u2")  # another user's day is their own
    events.clear()
    third = await start(store, config(Budgets(user_day=Ceiling(tokens=60))), other.id, events)
    assert third.steps == 3


async def test_a_warning_comes_once_when_spending_reaches_the_fraction(store: Store) -> None:
    cfg = config(Budgets(turn=Ceiling(tokens=100), warn_at=0.5))
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    await start(store, cfg, session.id, events)
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert [(w.scope, w.spent_tokens, w.limit_tokens) for w in warnings] == [("turn", 60, 100)]
    kinds = [e.name for e in events]
    assert kinds.index("budget_warning") == kinds.index("usage", kinds.index("budget_warning") - 1) + 1
    stored = [e.name for e in await store.events_after(warnings[0].turn_id, 0)]
    assert stored.count("budget_warning") == 1 and stored.count("usage") == 5


async def test_a_cost_ceiling_counts_nano_dollars_from_the_price_table(store: Store) -> None:
    # $1 per million input tokens and $2 per million output tokens: 15*1000 + 5*2000 = 25,000 a step.
    prices = {"scripted:runaway": Price(1000, 2000, 100, 1250, "test")}
    cfg = config(Budgets(turn=Ceiling(nano_usd=usd("0.0001"))), prices=prices)
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    turn = await start(store, cfg, session.id, events)
    usages = [e for e in events if isinstance(e, StepUsage)]
    assert [u.cost_nano_usd for u in usages] == [25_000] * 4
    assert [u.turn_cost_nano_usd for u in usages] == [25_000, 50_000, 75_000, 100_000]
    (req,) = requests(events)
    assert turn.steps == 4 and req.note is not None and "$0.0001" in req.note


async def test_without_ceilings_nothing_is_counted_but_usage_is_reported(store: Store) -> None:
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    spec = {"name": "short", "steps": [{"blocks": [{"type": "text", "text": "hi"}],
                                        "usage": {"input_tokens": 7, "output_tokens": 3,
                                                  "cache_read_input_tokens": 5}}]}
    turn = await start(store, config(Budgets(), spec=spec), session.id, events)
    (u,) = [e for e in events if isinstance(e, StepUsage)]
    assert (u.step, u.usage.cache_read_input_tokens, u.cost_nano_usd) == (1, 5, 0)
    assert await spent(store, f"turn:{turn.id}") == 0


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_a_server_that_reports_no_usage_is_charged_an_estimate_and_stops_at_the_ceiling(
        store: Store) -> None:
    """llama-cpp-python's recorded stream (a call, and no usage chunk), served to every step: a
    step is charged the characters it read and wrote, so the runaway loop pauses at its
    ceiling, saying the count is an estimate, instead of running to its step limit."""
    from tests.support.body_server import serving
    from tests.support.paths import REPO
    from turnstream.blocks import BLOCK_ADAPTER
    from turnstream.budgets import CHARS_PER_TOKEN, ESTIMATED
    from turnstream.providers.openai_chat import OpenAIChatProvider

    recorded = (REPO / "tests" / "fixtures" / "interop" / "llama-cpp-python-stream-no-usage.sse").read_bytes()
    session = await store.create_session("u1")
    events: list[StreamEvent] = []
    with serving(recorded) as srv:
        provider = OpenAIChatProvider("qwen", api_key="k", base_url=srv.base_url + "/v1")
        cfg = RunConfig(provider=provider, tools=[get_weather],
                        limits=Limits(max_steps=40, retry=FAST, budgets=Budgets(turn=Ceiling(tokens=400))))
        try:
            turn = await TurnRunner(cfg, store, on_event=events.append).run(session.id, "weather in Paris?")
        finally:
            await provider.aclose()
    assert turn.status == "awaiting_client" and 1 < turn.steps < 40
    usages = [e for e in events if isinstance(e, StepUsage)]
    assert all(u.usage.unknown and u.usage.input_tokens == 0 for u in usages)  # the event says what came

    def chars(blocks: Any) -> int:
        return sum(len(BLOCK_ADAPTER.dump_json(b)) for b in blocks)

    def estimate(k: int) -> int:  # step k read the input and every earlier step; wrote its call
        read = len("weather in Paris?") + chars(b for b in turn.blocks if b.step < k)
        wrote = chars(b for b in turn.blocks if b.step == k and not isinstance(b, ToolResultBlock))
        return -(-read // CHARS_PER_TOKEN) + -(-wrote // CHARS_PER_TOKEN)

    expected = sum(estimate(k) for k in range(1, turn.steps + 1))
    assert await spent(store, f"turn:{turn.id}") == expected >= 400
    (paused,) = [r for r in requests(events) if r.budget is not None]
    assert paused.note is not None and paused.note.endswith(ESTIMATED)


async def test_an_estimate_counts_only_the_turns_the_step_read(store: Store) -> None:
    """Without token counts a step is charged what it read: the path to its turn's parent,
    not a sibling branch (docs/branches.md)."""
    from turnstream.budgets import CHARS_PER_TOKEN, Meter
    from turnstream.lifecycle import TurnRecorder

    session = await store.create_session("u1")
    first = await store.create_turn(session.id, "a" * 400, model="m")
    await store.finish_turn(first.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=0)
    other = await store.create_turn(session.id, "b" * 4_000, model="m", parent_turn_id=first.id)
    await store.finish_turn(other.id, status="complete", stop_reason="end_turn", usage=Usage(), steps=0)
    mine = await store.create_turn(session.id, "c" * 40, model="m", parent_turn_id=first.id)  # b's sibling
    rec = TurnRecorder(store, mine.id, session.id, user_input="c" * 40)
    estimate = await Meter(store, Budgets(), "openai:m")._estimate(rec, 1)
    assert estimate.input_tokens == -(-(400 + 40) // CHARS_PER_TOKEN)
