"""The tool round alone (``turnstream/phases/tool_round.py``), on the memory store: the calls of a
step run, refused, or left waiting for the client, with the tool-effect ledger kept while they
run and the results stored in call order; and the two ways a turn goes on with calls it left
(approved after a pause, unanswered after a take-over)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from turnstream import tool
from turnstream.blocks import Block, ToolResultBlock, ToolUseBlock
from turnstream.budgets import Meter
from turnstream.errors import Refused
from turnstream.events import BudgetReached, StreamEvent, ToolProgress, ToolRequest
from turnstream.lifecycle import TurnRecorder
from turnstream.limits import Budgets, Limits
from turnstream.phases.tool_round import CUT_OFF, MAY_HAVE_RUN, REPEATED, RoundSettings, ToolRound
from turnstream.store.memory import MemoryStore
from turnstream.store.protocol import ToolCallStart
from turnstream.tools.executor import idempotency_key
from turnstream.tools.tool import Tool, ToolContext

ran: list[str] = []


@tool
def echo(value: str) -> str:
    """Echo a value."""
    ran.append(f"echo:{value}")
    return f"echo:{value}"


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Look a key up (safe to run twice)."""
    ran.append(f"lookup:{key}")
    return f"found:{key}"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount (asks the user first)."""
    ran.append(f"pay:{amount}")
    return f"paid:{amount}"


@tool
async def crunch(ctx: ToolContext) -> str:
    """Crunch, saying how far it got."""
    ctx.progress(1, 2, "half")
    ctx.progress(2, 2, "done")
    return "crunched"


TOOLS: dict[str, Tool] = {t.name: t for t in (echo, lookup, pay, crunch)}


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


async def turn(store: MemoryStore, events: list[StreamEvent], *calls: ToolUseBlock) -> TurnRecorder:
    """A running turn whose last step made ``calls`` (already stored, as a step leaves them)."""
    session = await store.create_session("u1")
    t = await store.create_turn(session.id, "go", model="scripted:unit")
    rec = TurnRecorder(store, t.id, session.id, user_input="go", on_event=events.append)
    for c in calls:
        c.seq = len(rec.blocks)
        await rec.add_block(c)
    return rec


def new_events() -> list[StreamEvent]:
    return []


def call(cid: str, name: str, step: int = 1, **input: object) -> ToolUseBlock:
    return ToolUseBlock(seq=0, step=step, tool_use_id=cid, name=name, input=dict(input))


def results(blocks: Sequence[Block]) -> list[tuple[str, str, bool]]:
    return [(b.tool_use_id, b.content, b.is_error) for b in blocks if isinstance(b, ToolResultBlock)]


async def test_the_calls_run_each_recorded_in_the_ledger_and_their_results_are_stored_in_call_order() -> None:
    store, events = MemoryStore(), new_events()
    a, b = call("c1", "echo", value="a"), call("c2", "lookup", key="k")
    rec = await turn(store, events, a, b)
    calls = ToolRound(store, rec, TOOLS, RoundSettings())
    assert await calls.run_calls([a, b], "tool_use", step=1, max_tokens=100) is False
    assert sorted(ran) == ["echo:a", "lookup:k"]
    ledger = {r.tool_use_id: r for r in await store.tool_calls(rec.turn_id)}
    assert {k: (r.state, r.result, r.idempotency_key) for k, r in ledger.items()} == {
        "c1": ("finished", "echo:a", idempotency_key(rec.turn_id, "c1")),
        "c2": ("finished", "found:k", idempotency_key(rec.turn_id, "c2"))}
    stored = await store.get_turn(rec.turn_id)
    assert stored is not None
    assert results(stored.blocks) == [("c1", "echo:a", False), ("c2", "found:k", False)]
    assert not any(isinstance(e, ToolRequest) for e in events) and stored.status == "running"


async def test_a_repeated_call_and_a_call_cut_off_twice_are_answered_without_running() -> None:
    store, events = MemoryStore(), new_events()
    earlier = call("c0", "echo", step=1, value="a")
    again = call("c1", "echo", step=2, value="a")
    cut = call("c2", "echo", step=2)
    cut.input_error = "cut off by max_tokens=200"
    rec = await turn(store, events, earlier, again, cut)
    calls = ToolRound(store, rec, TOOLS, RoundSettings(limits=Limits(max_identical_calls=1)))
    assert await calls.run_calls([again, cut], "max_tokens", step=2, max_tokens=200) is False
    assert ran == []
    assert results(rec.blocks) == [("c1", REPEATED.format(name="echo", k=1), True),
                                   ("c2", CUT_OFF.format(n=200), True)]
    assert await store.tool_calls(rec.turn_id) == []  # nothing ran, so the ledger holds nothing


async def test_a_call_that_needs_approval_stops_the_round_and_the_turn_waits_for_the_client() -> None:
    store, events = MemoryStore(), new_events()
    ok, ask = call("c1", "echo", value="a"), call("c2", "pay", amount=5)
    rec = await turn(store, events, ok, ask)
    calls = ToolRound(store, rec, TOOLS, RoundSettings())
    assert await calls.run_calls([ok, ask], "tool_use", step=1, max_tokens=100) is True
    assert ran == ["echo:a"]
    (req,) = [e for e in events if isinstance(e, ToolRequest)]
    assert (req.tool_use_id, req.tool_name, req.requires_approval, req.note) == ("c2", "pay", True, None)
    stored = await store.get_turn(rec.turn_id)
    assert stored is not None and stored.status == "awaiting_client"
    assert results(stored.blocks) == [("c1", "echo:a", False)]
    assert [c.tool_use_id for c in rec.unanswered()] == ["c2"]


async def test_after_the_pause_the_approved_call_runs_and_one_still_waiting_is_refused() -> None:
    store, events = MemoryStore(), new_events()
    first, second = call("c1", "pay", amount=5), call("c2", "pay", amount=7)
    rec = await turn(store, events, first, second)
    calls = ToolRound(store, rec, TOOLS, RoundSettings())
    with pytest.raises(Refused, match="still waits for c2"):
        await calls.run_pending({"c1": None})
    assert ran == []
    assert await calls.run_pending({"c1": None, "c2": None}) is False
    assert ran == ["pay:5", "pay:7"]
    assert results(rec.blocks) == [("c1", "paid:5", False), ("c2", "paid:7", False)]


async def test_after_a_take_over_a_call_that_ended_keeps_its_result_an_idempotent_one_runs_again_and_another_asks(
) -> None:
    store, events = MemoryStore(), new_events()
    ended, safe, unsafe, fresh = (call("c1", "echo", value="a"), call("c2", "lookup", key="k"),
                                  call("c3", "echo", value="b"), call("c4", "echo", value="c"))
    rec = await turn(store, events, ended, safe, unsafe, fresh)
    await store.start_tool_calls(rec.turn_id, [ToolCallStart(c.tool_use_id, c.name,
                                                             idempotency_key(rec.turn_id, c.tool_use_id))
                                               for c in (ended, safe, unsafe)])
    await store.end_tool_call(rec.turn_id, "c1", "echo:a (from before)", False)
    started = {r.tool_use_id: r for r in await store.tool_calls(rec.turn_id)}
    calls = ToolRound(store, rec, TOOLS, RoundSettings())
    assert await calls.resume_calls([ended, safe, unsafe, fresh], started) is True
    assert sorted(ran) == ["echo:c", "lookup:k"]  # c1 kept its result, c3 waits
    assert results(rec.blocks) == [("c1", "echo:a (from before)", False), ("c2", "found:k", False),
                                   ("c4", "echo:c", False)]
    (req,) = [e for e in events if isinstance(e, ToolRequest)]
    assert (req.tool_use_id, req.requires_approval, req.note) == ("c3", True, MAY_HAVE_RUN)
    ledger = {r.tool_use_id: r for r in await store.tool_calls(rec.turn_id)}
    assert ledger["c2"].attempts == 2 and ledger["c4"].attempts == 1 and ledger["c3"].state == "started"


async def test_a_running_call_reports_progress_as_live_events_before_its_result() -> None:
    store, events = MemoryStore(), new_events()
    c = call("c1", "crunch")
    rec = await turn(store, events, c)
    calls = ToolRound(store, rec, TOOLS, RoundSettings())
    assert await calls.run_calls([c], "tool_use", step=1, max_tokens=100) is False
    after_the_call = events[2:]  # the call's own block_start and block_stop come first
    assert [type(e).__name__ for e in after_the_call] == ["ToolProgress", "ToolProgress", "BlockStart", "BlockStop"]
    assert [(e.progress, e.total, e.message) for e in after_the_call if isinstance(e, ToolProgress)] == [
        (1.0, 2.0, "half"), (2.0, 2.0, "done")]
    stored_names = {e.name for e in await store.events_after(rec.turn_id, 0)}
    assert ToolProgress.name not in stored_names


async def test_a_budget_reached_asks_the_client_about_each_call_or_answers_them_as_not_run() -> None:
    reached = BudgetReached(scope="turn", spent_tokens=120, limit_tokens=100, extra_tokens=100)
    store, events = MemoryStore(), new_events()
    a, b = call("c1", "echo", value="a"), call("c2", "pay", amount=5)
    rec = await turn(store, events, a, b)
    meter = Meter(store, Budgets(), "scripted:unit")
    assert await ToolRound(store, rec, TOOLS, RoundSettings()).stop_for_budget([a, b], reached, meter) is True
    asked = [e for e in events if isinstance(e, ToolRequest)]
    assert [(r.tool_use_id, r.requires_approval, r.budget) for r in asked] == [("c1", True, reached),
                                                                               ("c2", True, reached)]
    stored = await store.get_turn(rec.turn_id)
    assert stored is not None and stored.status == "awaiting_client" and ran == []

    store, events = MemoryStore(), new_events()
    rec = await turn(store, events, a, b)
    answer = RoundSettings(limits=Limits(budgets=Budgets(on_limit="answer")))
    assert await ToolRound(store, rec, TOOLS, answer).stop_for_budget([a, b], reached, meter) is False
    assert results(rec.blocks) == [("c1", meter.answer_now(reached), True), ("c2", meter.answer_now(reached), True)]
    assert not any(isinstance(e, ToolRequest) for e in events) and ran == []
