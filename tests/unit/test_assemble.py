"""The Assembler on its own: fragments to blocks, its protocol checks, and tool-call ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstream.assemble import Assembler
from turnstream.blocks import TextBlock, ThinkingBlock, ToolUseBlock, Usage
from turnstream.errors import ProviderError, ProviderProtocolError
from turnstream.events import BlockDelta, BlockStart, BlockStop
from turnstream.providers.base import BlockClosed, BlockOpened, Delta, StepEnded


def asm(**kw: object) -> Assembler:
    args: dict[str, object] = {"step": 1, "first_seq": 0, "origin": "test:model", "provider": "test"}
    return Assembler(**(args | kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(("events", "message"), [
    ([BlockOpened(0, "text"), BlockOpened(0, "text")], "opened twice"),
    ([Delta(0, "text", "hi")], "not open"),
    ([BlockClosed(3)], "not open"),
    ([BlockOpened(0, "text"), BlockClosed(0), Delta(0, "text", "late")], "not open"),
    ([BlockOpened(0, "text"), Delta(0, "audio", "x")], "unknown delta kind"),  # type: ignore[arg-type]
    (["not an event"], "unknown provider event"),
])
def test_events_out_of_protocol_are_a_stream_protocol_error(events: list[object], message: str) -> None:
    a = asm()
    with pytest.raises(ProviderProtocolError, match=message) as err:
        for ev in events:
            a.feed(ev)  # type: ignore[arg-type]
    assert isinstance(err.value, ProviderError) and err.value.code == "stream_protocol"
    assert not err.value.retryable  # the same request would get the same stream


def test_blocks_take_turn_wide_indexes_and_end_only_on_their_signal() -> None:
    a = asm(first_seq=4)
    assert a.feed(BlockOpened("t", "thinking")) == BlockStart(index=4, type="thinking")
    assert a.feed(Delta("t", "thinking", "Hm.")) == BlockDelta(index=4, text="Hm.")
    assert a.feed(Delta("t", "signature", "SIG")) is None
    a.feed(BlockOpened("c", "tool_use", tool_use_id="toolu_1", name="get"))
    a.feed(Delta("c", "input_json", '{"city": "Pa'))
    assert a.finished == []  # a parsable prefix is not a finished call
    stop = a.feed(BlockClosed("t"))
    assert isinstance(stop, BlockStop) and stop.block == ThinkingBlock(seq=4, step=1, thinking="Hm.",
                                                                       signature="SIG", origin="test:model")
    a.feed(Delta("c", "input_json", 'ris"}'))
    stop = a.feed(BlockClosed("c"))
    assert isinstance(stop, BlockStop) and isinstance(stop.block, ToolUseBlock)
    assert (stop.index, stop.block.input, stop.block.raw_input) == (5, {"city": "Paris"}, '{"city": "Paris"}')
    assert not a.ended
    a.feed(StepEnded("tool_use", Usage(input_tokens=3)))
    assert a.ended and a.stop_reason == "tool_use" and a.usage.input_tokens == 3


def test_a_tool_call_without_id_or_with_a_taken_one_gets_a_unique_id() -> None:
    taken = {"call_1"}
    a = asm(taken_ids=taken)
    starts = [a.feed(BlockOpened(i, "tool_use", tool_use_id=tid, name="f"))
              for i, tid in enumerate(["call_1", None, "call_9", "call_9", None])]
    got = [s.tool_use_id for s in starts if isinstance(s, BlockStart)]
    assert got == ["call_1_2", "toolu_ts_2", "call_9", "call_9_2", "toolu_ts_3"]
    assert len(set(got)) == len(got) and set(got) <= taken  # the session's ids are kept up to date


def test_empty_arguments_are_an_empty_object_and_invalid_json_is_an_input_error() -> None:
    a = asm()
    a.feed(BlockOpened(0, "tool_use", tool_use_id="a", name="f"))
    a.feed(BlockOpened(1, "tool_use", tool_use_id="b", name="f"))
    a.feed(Delta(1, "input_json", '{"x": '))
    empty, broken = a.feed(BlockClosed(0)), a.feed(BlockClosed(1))
    assert isinstance(empty, BlockStop) and isinstance(empty.block, ToolUseBlock)
    assert empty.block.input == {} and empty.block.input_error is None
    assert isinstance(broken, BlockStop) and isinstance(broken.block, ToolUseBlock)
    assert broken.block.input_error and broken.block.raw_input == '{"x": '


def test_close_all_open_keeps_what_arrived() -> None:
    """What a cancelled or broken step keeps: the open blocks as they stand."""
    a = asm()
    a.feed(BlockOpened(0, "text"))
    a.feed(Delta(0, "text", "half an ans"))
    a.feed(BlockOpened(1, "tool_use", tool_use_id="c", name="f"))
    a.feed(Delta(1, "input_json", '{"q": "x'))
    stops = a.close_all_open()
    assert [type(s.block) for s in stops] == [TextBlock, ToolUseBlock]
    text, call = stops[0].block, stops[1].block
    assert isinstance(text, TextBlock) and text.text == "half an ans"
    assert isinstance(call, ToolUseBlock) and call.input_error  # never run: it was not complete
    assert a.close_all_open() == []


@given(st.text(max_size=200), st.integers(min_value=1, max_value=17))
def test_any_split_of_the_arguments_gives_the_same_call(value: str, size: int) -> None:
    import json

    raw = json.dumps({"value": value})
    a = asm()
    a.feed(BlockOpened(0, "tool_use", tool_use_id="c", name="f"))
    for i in range(0, len(raw), size):
        out = a.feed(Delta(0, "input_json", raw[i:i + size]))
        assert isinstance(out, BlockDelta) and out.partial_json == raw[i:i + size]
    stop = a.feed(BlockClosed(0))
    assert isinstance(stop, BlockStop) and isinstance(stop.block, ToolUseBlock)
    assert stop.block.input == {"value": value} and stop.block.raw_input == raw
