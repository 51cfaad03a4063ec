"""One depth limit for JSON from outside (issue 27, item 1): the measure itself, and the
entry points outside the server that use it (a model's tool arguments, their live partial
parse, an MCP configuration file, the remote chat's event decoding, an imported notebook)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstream.assemble import Assembler
from turnstream.blocks import ToolUseBlock
from turnstream.client import decode_event
from turnstream.errors import InvalidValue, UsageError
from turnstream.events import BlockStop
from turnstream.json_depth import MAX_DEPTH, check_depth, depth, loads, too_deep
from turnstream.mcp.config import load_mcp_config
from turnstream.notebook.ipynb import from_ipynb
from turnstream.partial_json import PartialJSON
from turnstream.providers.base import BlockClosed, BlockOpened, Delta
from turnstream.sse_decoder import SSEEvent


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


def _true_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_true_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_true_depth, value), default=0)
    return 0


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(alphabet='[]{}"\\k'), kids,
                                                                               max_size=4),
                    max_leaves=40)


@given(JSON)
def test_the_measure_is_the_nesting_of_the_parsed_value_whatever_the_strings_hold(value: object) -> None:
    text = json.dumps(value)
    assert depth(text) == _true_depth(value)
    assert depth(text.encode()) == _true_depth(value)


def test_the_limit_is_inclusive_and_a_hundred_thousand_levels_are_refused_quickly() -> None:
    assert not too_deep(nested(MAX_DEPTH)) and too_deep(nested(MAX_DEPTH + 1))
    started = time.perf_counter()
    with pytest.raises(InvalidValue, match=f"nested deeper than {MAX_DEPTH} levels") as err:
        check_depth(nested(100_000).encode(), "body")
    assert err.value.field == "body"
    assert time.perf_counter() - started < 1.0
    with pytest.raises(InvalidValue, match="not valid JSON") as err:
        loads(b"[1,", "message")
    assert err.value.field == "message"
    assert loads(b'{"a": ["[[["]}', "x") == {"a": ["[[["]}


def _tool_call(arguments: str) -> ToolUseBlock:
    a = Assembler(step=1, first_seq=0, origin="test:model", provider="test")
    a.feed(BlockOpened("c", "tool_use", tool_use_id="call_1", name="get"))
    a.feed(Delta("c", "input_json", arguments))
    stop = a.feed(BlockClosed("c"))
    assert isinstance(stop, BlockStop) and isinstance(stop.block, ToolUseBlock)
    return stop.block


def test_a_models_deep_tool_arguments_are_an_input_error_the_model_reads_not_a_crash() -> None:
    deep = '{"a": ' + nested(300) + "}"  # orjson reads 1,024 levels, but writes only 255
    block = _tool_call(deep)
    assert block.input == {} and block.raw_input == deep
    assert block.input_error == f"the arguments are nested deeper than {MAX_DEPTH} levels"
    orjson.dumps(block.model_dump())  # the block can be stored
    assert _tool_call('{"a": ' + nested(10) + "}").input_error is None


def test_a_live_partial_parse_of_deep_arguments_is_no_value() -> None:
    p = PartialJSON()
    p.feed('{"a": ' + "[" * 300 + "1")
    assert p.snapshot() is None
    p = PartialJSON()
    p.feed('{"a": [[1')
    assert p.snapshot() == {"a": [[1]]}


def test_a_deep_mcp_configuration_file_is_one_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"x": {"command": "true", "env": ' + nested(100_000) + "}}}")
    with pytest.raises(UsageError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load_mcp_config(path)


def test_the_remote_chat_skips_a_deep_event_instead_of_overflowing_its_stack() -> None:
    sse = SSEEvent(event="text_delta", data='{"text": ' + nested(100_000) + "}", id="t:1")
    assert decode_event(sse) is None


def test_an_ipynb_nested_a_hundred_thousand_deep_is_an_invalid_notebook() -> None:
    raw = ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": ' + nested(100_000) + '}, "cells": []}').encode()
    with pytest.raises(InvalidValue, match=f"nested deeper than {MAX_DEPTH} levels") as err:
        from_ipynb(raw)
    assert err.value.field == "notebook"
