"""Taking a turn over from the tool-effect ledger (``TurnRunner.take_over``), in one process:
a store that stops the first runner dead at a chosen moment (an exception no handler of the
runner catches, as ``kill -9`` leaves a turn ``running``), then a second runner on the same
store continues the turn from what it holds.

* A call that ended while a sibling still ran keeps its result (it is neither run again nor
  asked about); the sibling that had not ended runs again if idempotent, else is asked about.
* A step whose stream ended before any of its calls started goes on with those calls, decided
  as at the step's end: the model is not asked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from turnstream import ToolContext, tool
from turnstream.blocks import ToolResultBlock, ToolUseBlock, Turn
from turnstream.events import StepRestart, StreamEvent, ToolRequest
from turnstream.limits import Limits
from turnstream.loop import MAY_HAVE_RUN, RunConfig, TurnRunner
from turnstream.providers.scripted import ScriptedProvider
from turnstream.retry import RetryPolicy
from turnstream.scenarios.engine import Scenario
from turnstream.store import MemoryStore
from turnstream.store.protocol import ToolCallStart

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0)


class Crash(BaseException):
    """The process dies: nothing in the runner handles it, so nothing is ended or stored."""


class LedgerStore(MemoryStore):
    """A memory store that says when a call's end was kept, and dies at every call's start
    while ``crash_at_start`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = asyncio.Event()
        self.crash_at_start = False

    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        if self.crash_at_start:
            raise Crash
        await super().start_tool_calls(turn_id, calls)

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        await super().end_tool_call(turn_id, tool_use_id, result, is_error)
        self.ended.set()


class Calls:
    """What the tools were asked, and the tools themselves, for one test."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store
        self.log: list[tuple[str, str]] = []
        self.crash_slow = True

    def tools(self, *, slow_idempotent: bool) -> list[Any]:
        @tool(name="fast")
        def fast(ctx: ToolContext) -> str:
            """Finishes at once."""
            self.log.append(("fast", ctx.idempotency_key))
            return "fast done"

        @tool(name="slow", idempotent=slow_idempotent)
        async def slow(ctx: ToolContext) -> str:
            """Still running when the process dies (the first time)."""
            self.log.append(("slow", ctx.idempotency_key))
            if self.crash_slow:
                self.crash_slow = False
                await self.store.ended.wait()  # its sibling's end is kept first
                raise Crash
            return "slow done"

        return [fast, slow]


def scripted() -> ScriptedProvider:
    return ScriptedProvider(Scenario({"name": "takeover", "steps": [
        {"blocks": [{"type": "tool_use", "name": "fast", "input": {}},
                    {"type": "tool_use", "name": "slow", "input": {}}]},
        {"blocks": [{"type": "text", "text": "after: {{last}}"}]}]}))


async def started_turn(store: LedgerStore, calls: Calls, *, slow_idempotent: bool) -> str:
    """A turn whose runner died (``Crash``); its id."""
    await store.open()
    session = await store.create_session("u1")
    seen: list[StreamEvent] = []
    runner = TurnRunner(RunConfig(provider=scripted(), tools=calls.tools(slow_idempotent=slow_idempotent),
                                  limits=Limits(retry=FAST)), store, on_event=seen.append)
    with pytest.raises(BaseException) as died:  # Crash, or a group of Crash from the calls' task group
        await runner.run(session.id, "go", history=[])
    crash = died.value
    assert isinstance(crash, Crash) or (isinstance(crash, BaseExceptionGroup) and crash.split(Crash)[1] is None)
    turn_id = seen[0].turn_id
    stored = await store.get_turn(turn_id)
    assert stored is not None and stored.status == "running"
    return turn_id


async def take_over(store: LedgerStore, calls: Calls, turn_id: str, *,
                    slow_idempotent: bool) -> tuple[Turn, list[StreamEvent]]:
    seen: list[StreamEvent] = []
    runner = TurnRunner(RunConfig(provider=scripted(), tools=calls.tools(slow_idempotent=slow_idempotent),
                                  limits=Limits(retry=FAST)), store, on_event=seen.append)
    return await runner.take_over(turn_id), seen


def results(turn: Turn) -> list[tuple[str, bool]]:
    return [(b.content, b.is_error) for b in turn.blocks if isinstance(b, ToolResultBlock)]


async def test_a_call_that_ended_keeps_its_result_and_an_idempotent_sibling_runs_again() -> None:
    store = LedgerStore()
    calls = Calls(store)
    turn_id = await started_turn(store, calls, slow_idempotent=True)
    ledger = {r.tool: r for r in await store.tool_calls(turn_id)}
    assert (ledger["fast"].state, ledger["fast"].result, ledger["slow"].state) == ("finished", "fast done", "started")

    turn, seen = await take_over(store, calls, turn_id, slow_idempotent=True)
    assert (turn.status, turn.stop_reason) == ("complete", "end_turn")
    assert results(turn) == [("fast done", False), ("slow done", False)]  # in call order
    assert [name for name, _ in calls.log] == ["fast", "slow", "slow"]  # fast ran once
    assert calls.log[1][1] == calls.log[2][1]  # the same idempotency key
    assert not any(isinstance(e, ToolRequest | StepRestart) for e in seen)
    assert {r.tool: r.attempts for r in await store.tool_calls(turn_id)} == {"fast": 1, "slow": 2}


async def test_a_call_that_ended_is_not_asked_about_when_its_sibling_is() -> None:
    store = LedgerStore()
    calls = Calls(store)
    turn_id = await started_turn(store, calls, slow_idempotent=False)

    turn, seen = await take_over(store, calls, turn_id, slow_idempotent=False)
    assert turn.status == "awaiting_client"
    requests = [e for e in seen if isinstance(e, ToolRequest)]
    assert [r.tool_name for r in requests] == ["slow"] and requests[0].note == MAY_HAVE_RUN
    assert results(turn) == [("fast done", False)]
    assert [name for name, _ in calls.log] == ["fast", "slow"]


async def test_a_step_that_ended_before_its_calls_started_goes_on_with_them() -> None:
    store = LedgerStore()
    calls = Calls(store)
    calls.crash_slow = False
    store.crash_at_start = True  # the step's stream ended; the process dies as its first call starts
    turn_id = await started_turn(store, calls, slow_idempotent=False)
    stored = await store.get_turn(turn_id)
    assert stored is not None
    ids = [b.tool_use_id for b in stored.blocks if isinstance(b, ToolUseBlock)]
    assert len(ids) == 2 and await store.tool_calls(turn_id) == [] and calls.log == []
    store.crash_at_start = False

    turn, seen = await take_over(store, calls, turn_id, slow_idempotent=False)
    assert (turn.status, turn.steps) == ("complete", 2)
    assert not any(isinstance(e, StepRestart) for e in seen)  # the model was not asked again
    assert [b.tool_use_id for b in turn.blocks if isinstance(b, ToolUseBlock)] == ids  # the same calls
    assert results(turn) == [("fast done", False), ("slow done", False)]
    assert [name for name, _ in calls.log] == ["fast", "slow"]
    assert turn.text == "after: slow done"
