"""The interop suite's scenarios (played by ``turnstream mock-provider`` behind the server under
test), the tools they call, and what a correct turn looks like for each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from turnstream import Agent, tool
from turnstream.blocks import ThinkingBlock, ToolUseBlock, Turn
from turnstream.events import StepRestart, StreamEvent, TurnComplete
from turnstream.limits import Limits
from turnstream.providers.base import Provider
from turnstream.retry import RetryPolicy

NOTE = "".join(f"line {i:05d}: \"quoted\", {{braces}}, \\backslash\\ and ünïcödé\n" for i in range(220))
"""About 12 KB of tool argument text, with every character JSON must escape."""

PARALLEL = [
    {"blocks": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "name": "get_weather", "input": {"city": "Tokyo"}}],
     "usage": {"input_tokens": 30, "output_tokens": 12}},
    {"blocks": [{"type": "tool_use", "name": "get_time", "input": {"tz": "Europe/Paris"}}],
     "usage": {"input_tokens": 60, "output_tokens": 6}},
    {"blocks": [{"type": "text", "text": "Paris {{results[0]}}, Tokyo {{results[1]}}, time {{results[2]}}."}],
     "usage": {"input_tokens": 80, "output_tokens": 9}},
]
PARALLEL_TEXT = "Paris sunny in Paris, Tokyo sunny in Tokyo, time 12:00 in Europe/Paris."
PARALLEL_CALLS = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"}),
                  ("get_time", {"tz": "Europe/Paris"})]


ONE_CALL_A_STEP = [
    {"blocks": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}],
     "usage": {"input_tokens": 30, "output_tokens": 8}},
    {"blocks": [{"type": "tool_use", "name": "get_weather", "input": {"city": "Tokyo"}}],
     "usage": {"input_tokens": 45, "output_tokens": 6}},
    *PARALLEL[1:],
]
"""PARALLEL's calls, one a step, with the same answer: for a route that cannot carry parallel calls,
so that its faults are still tried."""


def _with_fault(step: int, fault: dict[str, Any], steps: list[dict[str, Any]] = PARALLEL) -> list[dict[str, Any]]:
    out = [dict(s) for s in steps]
    out[step] = {**out[step], "fault": fault}
    return out


SCENARIOS: dict[str, dict[str, Any]] = {
    "parallel": {"fragment_size": 5, "steps": PARALLEL},
    "large-args": {"fragment_size": 7, "steps": [
        {"blocks": [{"type": "text", "text": "Saving it."},
                    {"type": "tool_use", "name": "save_note", "input": {"text": NOTE}}]},
        {"blocks": [{"type": "text", "text": "Saved {{last}}."}]}]},
    "thinking": {"fragment_size": 6, "steps": [
        {"blocks": [{"type": "thinking", "thinking": "The user wants the weather in Paris.",
                     "signature": "sig-interop-1"},
                    {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"blocks": [{"type": "text", "text": "It is {{last}}."}]}]},
    "fault-status-529": {"fragment_size": 5, "steps": _with_fault(0, {"kind": "status", "status": 529,
                                                                      "retry_after": 0})},
    "fault-error-midstream": {"fragment_size": 5, "steps": _with_fault(1, {"kind": "error_event",
                                                                           "after_events": 4})},
    "fault-drop": {"fragment_size": 5, "steps": _with_fault(0, {"kind": "drop", "after_bytes": 400})},
}
ONE_CALL_SCENARIOS: dict[str, dict[str, Any]] = {
    "one-call-a-step": {"fragment_size": 5, "steps": ONE_CALL_A_STEP},
    "fault-status-529-one-call": {"fragment_size": 5, "steps": _with_fault(
        0, {"kind": "status", "status": 529, "retry_after": 0}, ONE_CALL_A_STEP)},
    "fault-error-midstream-one-call": {"fragment_size": 5, "steps": _with_fault(
        1, {"kind": "error_event", "after_events": 4}, ONE_CALL_A_STEP)},
    "fault-drop-one-call": {"fragment_size": 5, "steps": _with_fault(
        0, {"kind": "drop", "after_bytes": 400}, ONE_CALL_A_STEP)},
}
"""The four PARALLEL scenarios over ONE_CALL_A_STEP; ``check_turn`` holds them to the same answer."""


@dataclass
class Tools:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def all(self) -> list[Any]:
        @tool
        def get_weather(city: str) -> str:
            """Current weather for a city."""
            self.calls.append(("get_weather", {"city": city}))
            return f"sunny in {city}"

        @tool
        def get_time(tz: str) -> str:
            """The time in a time zone."""
            self.calls.append(("get_time", {"tz": tz}))
            return f"12:00 in {tz}"

        @tool
        def save_note(text: str) -> str:
            """Save a note."""
            self.calls.append(("save_note", {"text": text}))
            return f"{len(text)} characters"

        return [get_weather, get_time, save_note]


async def run_turn(provider: Provider, tools: Tools, *, thinking: bool = False, max_steps: int = 6,
                   watch: Callable[[StreamEvent], None] | None = None) -> tuple[Turn, list[StreamEvent]]:
    """One user turn over the real streaming path; the stored turn and the events (each shown to
    ``watch`` as it comes)."""
    limits = Limits(max_steps=max_steps, retry=RetryPolicy(base_delay=0.05, max_delay=0.2))
    agent = Agent(provider, tools=tools.all(), limits=limits, thinking_budget=1024 if thinking else None)
    events: list[StreamEvent] = []
    async for ev in agent.stream("Weather in Paris and Tokyo?"):
        events.append(ev)
        if watch is not None:
            watch(ev)
    done = events[-1]
    assert isinstance(done, TurnComplete), events[-3:]
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None
    return turn, events


def check_turn(scenario: str, turn: Turn, events: list[StreamEvent], tools: Tools) -> None:
    """What every server must give for ``scenario``: the loop ran to its answer, each tool ran
    once with the exact arguments, the answer quotes their results."""
    assert (turn.status, turn.stop_reason, turn.error) == ("complete", "end_turn", None)
    if scenario == "large-args":
        assert tools.calls == [("save_note", {"text": NOTE})], "12 KB of arguments byte for byte"
        assert turn.text == f"Saved {len(NOTE)} characters."
    elif scenario == "thinking":
        assert tools.calls == [("get_weather", {"city": "Paris"})]
        assert turn.text == "It is sunny in Paris."
    else:
        # the calls of one step run concurrently: each exactly once, in any order
        assert sorted(tools.calls, key=repr) == sorted(PARALLEL_CALLS, key=repr)
        assert turn.text == PARALLEL_TEXT
    calls = [b for b in turn.blocks if isinstance(b, ToolUseBlock)]
    if scenario not in ("large-args", "thinking"):
        assert [(c.name, c.input) for c in calls] == PARALLEL_CALLS, "the calls as the model made them, in order"
    assert len({c.tool_use_id for c in calls}) == len(calls), "unique tool-call ids"
    assert [b.seq for b in turn.blocks] == list(range(len(turn.blocks)))
    del events


def summary(turn: Turn, events: list[StreamEvent]) -> dict[str, Any]:
    """What differs between servers without being wrong: kept thinking, restarts, usage."""
    return {"thinking_blocks": sum(isinstance(b, ThinkingBlock) for b in turn.blocks),
            "restarts": sum(isinstance(e, StepRestart) for e in events),
            "usage_unknown": turn.usage.unknown, "input_tokens": turn.usage.input_tokens}
