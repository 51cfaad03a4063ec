"""The team rules of agents.py and the structured-answer helpers of output.py."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from turnstream.agents import Persona, Team, thinking_allowed
from turnstream.blocks import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnstream.errors import UsageError
from turnstream.events import BlockDelta, BlockStart
from turnstream.output import PartialOutputs, Repair, output_format, problem
from turnstream.providers.base import Message
from turnstream.providers.scripted import ScriptedProvider


def persona(name: str, *handoffs: str) -> Persona:
    return Persona(name, ScriptedProvider("echo"), handoffs=list(handoffs))


@pytest.mark.parametrize(("members", "says"), [
    ([persona("a"), persona("a")], "two agents are named 'a'"),
    ([persona("a", "b")], "hands over to 'b', which is not in the team"),
    ([persona("a", "a")], "cannot hand over to itself"),
    ([persona("a b")], "agent name 'a b'"),
    ([], "at least one agent"),
])
def test_a_team_that_cannot_work_is_refused(members: list[Persona], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        Team.of(members)


def test_hand_off_tools_and_which_call_counts() -> None:
    team = Team.of([persona("a", "b", "c"), persona("b"), persona("c")])
    assert [t.name for t in team.tools_of("a")] == ["transfer_to_b", "transfer_to_c"]
    assert team.tools_of("b") == []
    calls = [ToolUseBlock(tool_use_id="1", name="transfer_to_c"), ToolUseBlock(tool_use_id="2", name="transfer_to_b"),
             ToolUseBlock(tool_use_id="3", name="transfer_to_zz")]
    failed = ToolResultBlock(tool_use_id="1", content="Unknown", is_error=True)
    ok = ToolResultBlock(tool_use_id="2", content="ok")
    assert team.handoff_in("a", [*calls, failed, ok]) == "b"  # the first that succeeded
    assert team.handoff_in("a", calls) is None  # no results yet
    assert team.handoff_in("b", [*calls, ok]) is None  # b may not hand over to b's targets
    assert team.member("gone").name == "a"  # a name no longer in the team: the entry agent


def test_thinking_is_allowed_unless_a_foreign_step_ends_the_tool_loop() -> None:
    call = ToolUseBlock(tool_use_id="1", name="f")
    thought = ThinkingBlock(thinking="t", signature="s")
    assert thinking_allowed([Message("user", ["hi"])])
    assert thinking_allowed([Message("user", ["hi"]), Message("assistant", [TextBlock(text="x")])])
    assert thinking_allowed([Message("user", ["hi"]), Message("assistant", [thought, call]), Message("user", [])])
    assert not thinking_allowed([Message("user", ["hi"]), Message("assistant", [TextBlock(text="x"), call])])


class Point(BaseModel):
    x: int
    label: str


def test_output_format_problem_and_partial_parses() -> None:
    fmt = output_format(Point)
    assert fmt.name == "Point" and fmt.schema["required"] == ["x", "label"]
    assert problem(Point, '{"x": 1, "label": "a"}') is None
    assert problem(Point, '{"x": "one", "label": "a"}') == (
        "x: Input should be a valid integer, unable to parse string as an integer")
    assert (problem(Point, '{"x": 1') or "").startswith("Invalid JSON: EOF")
    parts = PartialOutputs()
    parts.see(BlockStart(index=0, type="thinking"))
    parts.see(BlockStart(index=1, type="text"))
    seen = []
    for frag in ['{"x"', ": 12", ', "lab', 'el": "ab', 'c"}']:
        ev = BlockDelta(index=1, text=frag)
        parts.see(ev)
        seen.append(ev.output)
    assert seen == [{}, {"x": 12}, {"x": 12}, {"x": 12, "label": "ab"}, {"x": 12, "label": "abc"}]
    thinking = BlockDelta(index=0, text='{"x": 1}')
    parts.see(thinking)
    assert thinking.output is None  # only the answer's text blocks


def test_the_repair_message_follows_the_failed_answer() -> None:
    r = Repair()
    r.ask(1, Point, "x: wrong")
    history = [("q", [TextBlock(text="bad", step=1, seq=0), TextBlock(text="good", step=2, seq=1)])]
    msgs = r.build(history, "scripted:x")
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert "not a valid Point: x: wrong" in str(msgs[2].blocks[0])
