"""TurnRunner's decisions, driven by the in-process scripted provider and the memory store:
when it calls the model again, what it refuses to run, how it restarts and how it ends."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.recording import Recording
from turnstream import Tool, tool
from turnstream.blocks import ToolResultBlock, ToolUseBlock, Turn
from turnstream.errors import StreamBrokenError
from turnstream.events import ErrorEvent, StepRestart, StreamEvent, ToolRequest, TurnComplete
from turnstream.lifecycle import submit_tool_result
from turnstream.limits import Limits
from turnstream.loop import CANCELLED, CUT_OFF, LIMIT_REACHED, REPEATED, RunConfig, TurnRunner
from turnstream.mock.validate import anthropic_errors
from turnstream.providers.anthropic import request_body
from turnstream.providers.base import ModelRequest
from turnstream.retry import RetryPolicy
from turnstream.store import MemoryStore
from turnstream.transcript import build

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0)


def use(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


def say(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@tool
def echo(value: str) -> str:
    """Echo a value."""
    return f"echo:{value}"


async def play(spec: dict[str, Any], *tools: Tool, limits: Limits | None = None,
               events: list[StreamEvent] | None = None) -> tuple[Turn, Recording, MemoryStore]:
    provider = Recording(spec)
    store = MemoryStore()
    await store.open()
    session = await store.create_session("u1")
    config = RunConfig(provider=provider, tools=list(tools) or [echo], limits=limits or Limits(retry=FAST))
    runner = TurnRunner(config, store, on_event=events.append if events is not None else None)
    turn = await runner.run(session.id, "go", history=[])
    return turn, provider, store


def results(turn: Turn) -> list[tuple[str, bool]]:
    return [(b.content, b.is_error) for b in turn.blocks if isinstance(b, ToolResultBlock)]


def valid_for_anthropic(turn: Turn, *, reordered: bool = False) -> bool:
    """The stored turn needs no repair (but putting results in call order, when ``reordered``:
    results are stored as they arrive), and the request the session's next message sends is
    one the API accepts."""
    messages, repairs = build([(turn.input, turn.blocks), ("next", [])], "anthropic:x")
    allowed = {"put tool results first, in call order"} if reordered else set()
    return set(repairs) <= allowed and anthropic_errors(request_body(ModelRequest(model="x",
                                                                                  messages=messages))) is None


async def test_it_loops_while_the_model_calls_tools_and_answers_each_call_in_order() -> None:
    turn, provider, _ = await play({"steps": [
        {"blocks": [use("echo", value="a"), use("echo", value="b")]},
        {"blocks": [use("echo", value="c")]},
        {"blocks": [say("done: {{last}}")]}]})
    assert (turn.status, turn.stop_reason, turn.steps, len(provider.requests)) == ("complete", "end_turn", 3, 3)
    assert results(turn) == [("echo:a", False), ("echo:b", False), ("echo:c", False)]
    assert turn.text == "done: echo:c"


async def test_the_last_allowed_step_is_not_run_and_one_tools_off_call_answers() -> None:
    turn, provider, _ = await play({"steps": [{"blocks": [use("echo", value="{{last}}x")]}]},
                                   limits=Limits(max_steps=2, retry=FAST))
    assert turn.stop_reason == "max_steps" and turn.status == "complete"
    assert [r.tool_choice for r in provider.requests] == ["auto", "auto", "none"]
    assert results(turn)[-1] == (LIMIT_REACHED.format(n=2), True)
    assert valid_for_anthropic(turn)


async def test_the_same_call_a_third_time_is_not_run() -> None:
    ran: list[str] = []

    @tool
    def count(x: int) -> str:
        """Count."""
        ran.append(str(x))
        return "ok"

    turn, _, _ = await play({"steps": [{"blocks": [use("count", x=1)]}] * 3 + [{"blocks": [say("stop")]}]}, count)
    assert ran == ["1", "1"]
    assert results(turn)[2] == (REPEATED.format(name="count", k=2), True)


async def test_a_call_cut_by_max_tokens_is_retried_larger_once_then_refused() -> None:
    cut = {"type": "tool_use", "name": "echo", "input": {"value": "x" * 40}, "cut_at": 12}
    events: list[StreamEvent] = []
    turn, provider, _ = await play({"steps": [{"blocks": [cut]}, {"blocks": [say("gave up")]}]},
                                   limits=Limits(max_tokens=100, retry=FAST), events=events)
    assert [r.max_tokens for r in provider.requests] == [100, 200, 200]
    assert any(isinstance(e, StepRestart) and "max_tokens" in e.reason for e in events)
    assert results(turn) == [(CUT_OFF.format(n=200), True)]
    assert valid_for_anthropic(turn)


async def test_pause_turn_calls_the_model_again_without_a_tool() -> None:
    turn, provider, _ = await play({"steps": [{"blocks": [say("part one")], "stop_reason": "pause_turn"},
                                              {"blocks": [say("part two")]}]})
    assert len(provider.requests) == 2 and turn.stop_reason == "end_turn"


async def test_a_broken_stream_restarts_the_step_then_fails_the_turn_with_a_valid_transcript() -> None:
    events: list[StreamEvent] = []
    broken = {"fault": {"kind": "truncate", "times": 99}, "blocks": [say("never whole")]}
    turn, provider, _ = await play({"steps": [{"blocks": [use("echo", value="a")]}, broken]}, events=events)
    assert len(provider.requests) == 1 + 3  # the step, and two restarts of it
    assert sum(isinstance(e, StepRestart) for e in events) == 2
    err = next(e for e in events if isinstance(e, ErrorEvent))
    assert err.code == StreamBrokenError.code and err.retryable
    assert (turn.status, turn.stop_reason) == ("failed", "error")
    assert valid_for_anthropic(turn)


async def test_cancel_keeps_what_streamed_and_answers_the_dangling_call() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    provider = Recording({"steps": [{"blocks": [say("working"), use("hang")]}]})
    store = MemoryStore()
    session = await store.create_session("u1")
    runner = TurnRunner(RunConfig(provider=provider, tools=[hang]), store)
    task = asyncio.create_task(runner.run(session.id, "go", history=[]))
    await started.wait()
    runner.cancel()
    turn = await task
    assert (turn.status, turn.stop_reason) == ("cancelled", "cancelled")
    assert turn.blocks[0].type == "text" and results(turn) == [(CANCELLED, True)]
    stored = await store.get_turn(turn.id)
    assert stored is not None and stored.status == "cancelled" and valid_for_anthropic(stored)


async def test_a_runner_cancelled_before_it_starts_creates_nothing() -> None:
    store = MemoryStore()
    session = await store.create_session("u1")
    runner = TurnRunner(RunConfig(provider=Recording({"steps": [{"blocks": [say("hi")]}]})), store)
    runner.cancel()
    try:
        await runner.run(session.id, "go", history=[])
    except Exception as exc:
        assert type(exc).__name__ == "TurnCancelled"
    else:
        raise AssertionError("the runner started after cancel()")
    assert await store.list_turns(session.id) == []


async def test_a_client_tool_pauses_the_turn_and_its_result_continues_it() -> None:
    events: list[StreamEvent] = []
    spec = {"steps": [{"blocks": [use("locate"), use("echo", value="x")]}, {"blocks": [say("in {{results[0]}}")]}]}
    turn, provider, store = await play(spec, echo, Tool.client("locate"), events=events)
    assert (turn.status, turn.stop_reason) == ("awaiting_client", "awaiting_client")
    request = next(e for e in events if isinstance(e, ToolRequest))
    assert (request.tool_name, request.executor) == ("locate", "client")
    assert isinstance(events[-1], TurnComplete) and events[-1].status == "awaiting_client"
    assert await submit_tool_result(store, turn.id, request.tool_use_id, content="Oslo")
    resumed = await TurnRunner(RunConfig(provider=provider, tools=[echo]), store).resume(turn.id)
    assert (resumed.status, resumed.text) == ("complete", "in Oslo")
    call_ids = [b.tool_use_id for b in resumed.blocks if isinstance(b, ToolUseBlock)]
    result_ids = [b.tool_use_id for b in resumed.blocks if isinstance(b, ToolResultBlock)]
    assert sorted(call_ids) == sorted(result_ids) and valid_for_anthropic(resumed, reordered=True)
