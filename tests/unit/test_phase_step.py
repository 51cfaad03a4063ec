"""The step alone (``turnstream/phases/step.py``), with the scripted provider and the memory
store: the request it builds, the blocks it streams into the turn's recorder and its stop
reason, a restart from the same transcript when the stream breaks, a larger ``max_tokens``
when a call was cut off, and the messages queued at the step boundary."""

from __future__ import annotations

from typing import Any

from tests.support.recording import Recording
from turnstream import tool
from turnstream.agents import Persona
from turnstream.blocks import Block, TextBlock, ToolUseBlock, UserBlock
from turnstream.events import BlockDelta, BlockStart, BlockStop, StepRestart, StepStart, StreamEvent
from turnstream.lifecycle import TurnRecorder
from turnstream.limits import Limits
from turnstream.output import Repair
from turnstream.phases.step import ModelStep, StepSettings
from turnstream.retry import RetryPolicy
from turnstream.store.memory import MemoryStore
from turnstream.tools.tool import Tool

FAST = Limits(retry=RetryPolicy(base_delay=0.0, max_delay=0.0))


@tool
def echo(value: str) -> str:
    """Echo a value."""
    return value


TOOLS: dict[str, Tool] = {echo.name: echo}


def say(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def use(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


async def setup(spec: dict[str, Any], limits: Limits = FAST, *, live: bool = True
                ) -> tuple[ModelStep, TurnRecorder, Recording, MemoryStore, list[StreamEvent]]:
    store = MemoryStore()
    session = await store.create_session("u1")
    t = await store.create_turn(session.id, "go", model="scripted:unit")
    events: list[StreamEvent] = []
    rec = TurnRecorder(store, t.id, session.id, user_input="go", on_event=events.append)
    return ModelStep(store, StepSettings(limits=limits, live_deltas=live)), rec, Recording(spec), store, events


def persona(provider: Recording) -> Persona:
    return Persona("", provider, "Be brief.", list(TOOLS.values()))


def kinds(blocks: list[Block]) -> list[tuple[int, str]]:
    return [(b.step, b.type) for b in blocks]


async def test_a_step_streams_its_blocks_into_the_turn_and_hands_back_its_stop_reason() -> None:
    step, rec, provider, store, events = await setup({"steps": [{"blocks": [say("checking"), use("echo", value="a")]}]})
    asm = await step.run(rec, 1, persona(provider), TOOLS, history=[], repair=Repair(), final=False)
    assert asm.ended and asm.stop_reason == "tool_use" and step.current is None
    assert kinds(rec.blocks) == [(1, "text"), (1, "tool_use")]
    call = rec.blocks[1]
    assert isinstance(call, ToolUseBlock) and (call.name, call.input) == ("echo", {"value": "a"})
    stored = await store.get_turn(rec.turn_id)
    assert stored is not None and kinds(stored.blocks) == kinds(rec.blocks)
    assert isinstance(events[0], StepStart) and events[0].step == 1
    assert [e.block for e in events if isinstance(e, BlockStop)] == rec.blocks
    assert any(isinstance(e, BlockDelta) for e in events)
    assert rec.usage.output_tokens == 10 and len(rec.step_usage) == 1
    (request,) = provider.requests
    assert (request.system, [t.name for t in request.tools], request.tool_choice, request.max_tokens) == (
        "Be brief.", ["echo"], "auto", FAST.max_tokens)
    assert request.cache_key == f"turnstream-{rec.session_id}"


async def test_the_last_step_asks_with_tools_off_after_the_earlier_turns_and_live_deltas_off_sends_no_deltas() -> None:
    step, rec, provider, _, events = await setup({"steps": [{"blocks": [say("the answer")]}]}, live=False)
    earlier = ("before", [TextBlock(seq=0, step=1, text="noted")])
    asm = await step.run(rec, 3, persona(provider), TOOLS, history=[earlier], repair=Repair(), final=True)
    assert asm.stop_reason == "end_turn" and kinds(rec.blocks) == [(3, "text")]
    (request,) = provider.requests
    assert request.tool_choice == "none"
    assert [(m.role, m.blocks[0]) for m in request.messages] == [  # the session's earlier turn comes first
        ("user", "before"), ("assistant", earlier[1][0]), ("user", "go")]
    assert not any(isinstance(e, BlockDelta) for e in events)
    assert [type(e) for e in events] == [StepStart, BlockStart, BlockStop]


async def test_a_broken_stream_is_requested_again_from_the_same_transcript() -> None:
    spec = {"steps": [{"blocks": [say("half of it"), say("and more")], "fault": {"kind": "truncate"}}]}
    step, rec, provider, store, events = await setup(spec)
    asm = await step.run(rec, 1, persona(provider), TOOLS, history=[], repair=Repair(), final=False)
    assert asm.stop_reason == "end_turn" and len(provider.requests) == 2
    assert provider.requests[0].messages == provider.requests[1].messages
    (restart,) = [e for e in events if isinstance(e, StepRestart)]
    assert restart.step == 1 and "StreamBrokenError" in restart.reason
    assert [type(e) for e in events].count(StepStart) == 2
    texts = [b.text for b in rec.blocks if isinstance(b, TextBlock)]
    assert texts == ["half of it", "and more"]  # what the broken attempt kept was dropped first
    stored = await store.get_turn(rec.turn_id)
    assert stored is not None and [b.text for b in stored.blocks if isinstance(b, TextBlock)] == texts


async def test_a_call_cut_off_by_max_tokens_is_asked_again_with_twice_the_limit_once() -> None:
    cut = {"type": "tool_use", "name": "echo", "input": {"value": "x" * 40}, "cut_at": 12}
    step, rec, provider, _, events = await setup({"steps": [{"blocks": [cut]}]}, Limits(max_tokens=100,
                                                                                         retry=FAST.retry))
    asm = await step.run(rec, 1, persona(provider), TOOLS, history=[], repair=Repair(), final=False)
    assert [r.max_tokens for r in provider.requests] == [100, 200] and step.max_tokens == 200
    assert asm.stop_reason == "max_tokens"
    assert any(isinstance(e, StepRestart) and "max_tokens=200" in e.reason for e in events)
    (call,) = rec.blocks
    assert isinstance(call, ToolUseBlock) and call.input_error == "cut off by max_tokens=200"


async def test_a_call_that_fits_the_larger_limit_comes_back_whole() -> None:
    cut = {"type": "tool_use", "name": "echo", "input": {"value": "x" * 40}, "cut_at": 12, "fits_max_tokens": 150}
    step, rec, provider, _, _ = await setup({"steps": [{"blocks": [cut]}]}, Limits(max_tokens=100, retry=FAST.retry))
    asm = await step.run(rec, 1, persona(provider), TOOLS, history=[], repair=Repair(), final=False)
    (call,) = rec.blocks
    assert asm.stop_reason == "tool_use" and isinstance(call, ToolUseBlock)
    assert call.input_error is None and call.input == {"value": "x" * 40}


async def test_messages_queued_while_the_turn_ran_join_the_step_that_ended() -> None:
    step, rec, _, store, _ = await setup({"steps": [{"blocks": [say("hi")]}]})
    assert await store.queue_message(rec.session_id, "also this") is not None
    await step.take_queued(rec, 2)
    (queued,) = rec.blocks
    assert isinstance(queued, UserBlock) and (queued.step, queued.text) == (2, "also this")
    await step.take_queued(rec, 2)
    assert len(rec.blocks) == 1  # taken once
