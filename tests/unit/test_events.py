"""events.py owns every payload both ways: ``decode(encode(e)) == e`` for every kind of event,
and a payload that does not fit its name is refused with a clear error, never half-read."""

from __future__ import annotations

from typing import Any, get_args

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstream.blocks import (
    BlockType,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    TurnStatus,
    TurnStopReason,
    Usage,
)
from turnstream.bus import Envelope
from turnstream.errors import InvalidValue
from turnstream.events import (
    EVENT_TYPES,
    BlockDelta,
    BlockStart,
    BlockStop,
    BudgetReached,
    BudgetScope,
    BudgetWarning,
    ContextManaged,
    ErrorEvent,
    Reconnect,
    StepRestart,
    StepStart,
    StepUsage,
    StreamEvent,
    ToolApproval,
    ToolProgress,
    ToolRequest,
    TurnComplete,
    TurnStart,
    decode,
)
from turnstream.store.protocol import StoredEvent

text = st.text(max_size=30)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=16)
small = st.integers(min_value=0, max_value=10_000)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(text, inner, max_size=3), max_leaves=8)
objects = st.dictionaries(text, json_values, max_size=4)
meta = {"turn_id": ids, "n": st.integers(min_value=1, max_value=10**6)}

blocks = st.one_of(
    st.builds(TextBlock, seq=small, step=small, text=text, agent=st.none() | ids),
    st.builds(ThinkingBlock, seq=small, step=small, thinking=text, signature=text, origin=st.none() | text),
    st.builds(RedactedThinkingBlock, seq=small, step=small, data=text),
    st.builds(ToolUseBlock, seq=small, step=small, tool_use_id=ids, name=ids, input=objects,
              raw_input=st.none() | text, input_error=st.none() | text),
    st.builds(ToolResultBlock, seq=small, step=small, tool_use_id=ids, content=text, is_error=st.booleans(),
              agent=st.none() | ids),
)
usages = st.builds(Usage, input_tokens=small, output_tokens=small, cache_read_input_tokens=small,
                   cache_creation_input_tokens=small)
tool_ids = st.none() | ids

events: st.SearchStrategy[StreamEvent] = st.one_of(
    st.builds(TurnStart, session_id=ids, **meta),
    st.builds(StepStart, step=small, max_steps=small, agent=st.none() | ids, **meta),
    st.one_of(
        st.builds(BlockStart, index=small, type=st.sampled_from(get_args(BlockType)), agent=st.none() | ids,
                  **meta),
        st.builds(BlockStart, index=small, type=st.just("tool_use"), tool_use_id=ids, tool_name=ids, **meta)),
    st.one_of(st.builds(BlockDelta, index=small, text=text, output=json_values, **meta),
              st.builds(BlockDelta, index=small, partial_json=text, input=json_values, **meta)),
    st.builds(BlockStop, index=small, block=st.none() | blocks, **meta),
    st.builds(ToolRequest, tool_use_id=ids, tool_name=ids, input=objects,
              executor=st.sampled_from(["client", "server"]), requires_approval=st.booleans(),
              note=st.none() | text, budget=st.none() | st.builds(
                  BudgetReached, scope=st.sampled_from(get_args(BudgetScope)), spent_tokens=small,
                  spent_nano_usd=small, limit_tokens=st.none() | small, limit_nano_usd=st.none() | small,
                  extra_tokens=st.none() | small, extra_nano_usd=st.none() | small), **meta),
    st.builds(StepUsage, step=small, usage=usages, cost_nano_usd=small, turn_cost_nano_usd=small,
              tool_use_id=st.none() | ids, **meta),
    st.builds(BudgetWarning, scope=st.sampled_from(get_args(BudgetScope)), spent_tokens=small,
              spent_nano_usd=small, limit_tokens=st.none() | small, limit_nano_usd=st.none() | small, **meta),
    st.builds(ToolApproval, tool_use_id=ids, approved=st.booleans(), **meta),
    st.builds(ToolProgress, tool_use_id=ids, progress=st.floats(0, 1e9), total=st.none() | st.floats(0, 1e9),
              message=st.none() | text, **meta),
    st.builds(StepRestart, step=small, reason=text, **meta),
    st.builds(ContextManaged, step=small, cleared=st.lists(ids, max_size=4), tokens_before=small,
              tokens_after=small, window=small, retry=st.booleans(), summarised=small, **meta),
    st.builds(TurnComplete, status=st.sampled_from(get_args(TurnStatus)),
              stop_reason=st.none() | st.sampled_from(get_args(TurnStopReason)), usage=usages, steps=small,
              **meta),
    st.builds(ErrorEvent, code=ids, message=text, retryable=st.booleans(), **meta),
    st.builds(Reconnect, reason=text, **meta),
)


@given(events)
def test_every_event_round_trips_through_its_payload(ev: StreamEvent) -> None:
    wire = orjson.loads(orjson.dumps(ev.data()))  # what a client reads back
    assert decode(ev.name, wire, turn_id=ev.turn_id, n=ev.n) == ev


@given(events)
def test_the_stored_record_and_the_envelope_are_made_one_way(ev: StreamEvent) -> None:
    stored = StoredEvent.of(ev)
    assert (stored.turn_id, stored.n, stored.name, stored.data) == (ev.turn_id, ev.n, ev.name, ev.data())
    assert stored.event() == ev
    env = Envelope.of("s1", ev)
    assert env.event() is ev
    assert Envelope.stored("s1", stored).event() == ev
    assert orjson.loads(env.json) == orjson.loads(orjson.dumps(ev.data()))


def test_every_kind_is_in_the_table() -> None:
    assert set(EVENT_TYPES.values()) == set(get_args(StreamEvent))


@pytest.mark.parametrize(("name", "data", "why"), [
    ("nope", {}, "unknown event"),
    ("step_start", {"step": 1}, "missing"),
    ("step_start", {"step": "1", "max_steps": 10}, "integer"),
    ("block_start", {"index": 0, "type": "video"}, "type must be one of"),
    ("tool_request", {"tool_use_id": "t", "name": "x", "input": [], "executor": "client",
                      "requires_approval": False}, "object"),
    ("tool_request", {"tool_use_id": "t", "name": "x", "input": {}, "executor": "browser",
                      "requires_approval": False}, "executor"),
    ("tool_approval", {"tool_use_id": "t", "approved": "yes"}, "true or false"),
    ("turn_complete", {"turn_id": "t", "status": "done", "stop_reason": None, "usage": {}, "steps": 1}, "status"),
    ("block_stop", {"index": 0, "block": {"type": "text"}}, "not a block_stop"),
    ("error", ["not", "an", "object"], "not a error"),
])
def test_a_payload_that_does_not_fit_is_refused(name: str, data: Any, why: str) -> None:
    with pytest.raises(InvalidValue, match=why):
        decode(name, data)
