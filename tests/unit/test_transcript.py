"""Transcript repair: whatever damage a crash, a cancel or a bad client left, the request
turnstream sends passes the providers' pairing rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnstream.blocks import (
    Block,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from turnstream.mock.validate import anthropic_errors
from turnstream.providers.anthropic import messages_to_wire
from turnstream.providers.base import Message, ModelRequest
from turnstream.transcript import INTERRUPTED_RESULT, build, repair, turn_messages

ORIGIN = "anthropic:m"


def wire_ok(messages: list[Message]) -> str | None:
    return anthropic_errors({"messages": messages_to_wire(ModelRequest("m", messages)), "max_tokens": 10})


def call(i: str, step: int = 1) -> ToolUseBlock:
    return ToolUseBlock(tool_use_id=i, name="t", input={"i": i}, step=step)


def result(i: str, step: int = 1, content: str = "ok") -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=i, content=content, step=step)


def test_dangling_call_gets_an_interrupted_error_result() -> None:
    msgs, repairs = build([("hi", [TextBlock(text="x", step=1), call("a")]), ("next", [])], ORIGIN)
    assert wire_ok(msgs) is None
    res = msgs[2].blocks[0]
    assert isinstance(res, ToolResultBlock) and res.is_error and res.content == INTERRUPTED_RESULT
    assert msgs[2].blocks[1] == "next"  # the new input follows the closed-out result
    assert any("dangling" in r for r in repairs)


def test_orphan_and_duplicate_results_are_dropped_first_kept() -> None:
    blocks: list[Block] = [call("a"), result("zz"), result("a", content="first"), result("a", content="second")]
    msgs, repairs = build([("hi", blocks)], ORIGIN)
    assert wire_ok(msgs) is None
    results = [b for b in msgs[-1].blocks if isinstance(b, ToolResultBlock)]
    assert [(r.tool_use_id, r.content) for r in results] == [("a", "first")]
    assert len(repairs) == 2


def test_results_put_in_call_order_before_text() -> None:
    raw = [Message("user", ["q"]), Message("assistant", [call("a"), call("b")]),
           Message("user", ["typed meanwhile", result("b"), result("a")])]
    msgs, _ = repair(raw, ORIGIN)
    assert wire_ok(msgs) is None
    assert [getattr(b, "tool_use_id", b) for b in msgs[2].blocks] == ["a", "b", "typed meanwhile"]


def test_thinking_is_replayed_only_to_its_model_and_only_signed() -> None:
    mine = ThinkingBlock(thinking="hm", signature="s1", origin=ORIGIN, step=1)
    other = ThinkingBlock(thinking="hm", signature="s2", origin="anthropic:other", step=1)
    unsigned = ThinkingBlock(thinking="cut", signature="", origin=ORIGIN, step=1)
    msgs, _ = build([("hi", [mine, other, unsigned, call("a"), result("a")])], ORIGIN)
    assert msgs[1].blocks[:2] == [mine, call("a")]


def test_turn_messages_group_results_by_step() -> None:
    blocks = [TextBlock(text="t", step=1, seq=0), call("a", 1), result("a", 1), TextBlock(text="done", step=2)]
    msgs = turn_messages("hi", blocks)
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant"]


# -- property: random damage always repairs to something valid -----------------------------

ids = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def damaged(draw: st.DrawFn) -> list[Message]:
    msgs: list[Message] = []
    for _ in range(draw(st.integers(1, 6))):
        role = draw(st.sampled_from(["user", "assistant"]))
        blocks: list[Block | str] = []
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["text", "call", "result", "thinking"]))
            if kind == "text":
                blocks.append(draw(st.sampled_from(["", "hello"])) if role == "user" else TextBlock(text="hi"))
            elif kind == "call":
                blocks.append(call(draw(ids)))
            elif kind == "result":
                blocks.append(result(draw(ids)))
            else:
                blocks.append(ThinkingBlock(thinking="t", signature=draw(st.sampled_from(["", "s"])),
                                            origin=draw(st.sampled_from([ORIGIN, "x:y"]))))
        msgs.append(Message(role, blocks))  # type: ignore[arg-type]
    return msgs


@settings(max_examples=500, deadline=None)
@given(damaged())
def test_any_damage_repairs_to_a_transcript_the_api_accepts(msgs: list[Message]) -> None:
    fixed, _ = repair(msgs, ORIGIN)
    if not fixed:
        return
    if fixed[-1].role == "assistant":
        fixed.append(Message("user", ["continue"]))
        fixed, _ = repair(fixed, ORIGIN)
    assert wire_ok(fixed) is None
    # nothing the user said is lost
    said = [b for m in msgs if m.role == "user" for b in m.blocks if isinstance(b, str) and b]
    kept = [b for m in fixed if m.role == "user" for b in m.blocks if isinstance(b, str)]
    assert all(s in kept for s in said)


@settings(max_examples=200, deadline=None)
@given(damaged())
def test_repair_is_idempotent(msgs: list[Message]) -> None:
    once, _ = repair(msgs, ORIGIN)
    twice, repairs = repair(once, ORIGIN)
    assert twice == once
    assert repairs == []
