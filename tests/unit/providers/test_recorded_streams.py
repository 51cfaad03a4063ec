"""Every recorded stream (shared/fixtures/streams, all three APIs) through the adapter's parser
and the Assembler: the blocks equal what the official SDK assembled, however the bytes are
split; the stop reason is mapped; a step ending in tool calls yields a follow-up request the
API's validator accepts, carrying the same inputs. Cases where the SDK raised have their own
documented outcome in ``test_recorded_sdk_failures.py``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support.replay import (
    Assembled,
    Case,
    Outcome,
    assemble,
    cases,
    drive,
    expected,
    follow_up_body,
    inputs_sent,
    normalise,
    random_pieces,
    split_at,
    validator,
)
from turnstream.blocks import ToolUseBlock
from turnstream.providers import anthropic

ALL = cases()
OK = [c for c in ALL if not c.sdk_error and c.name not in (
    # the SDKs accept these two although their last event is unterminated (no blank line after
    # message_stop): turnstream refuses them, see test_recorded_sdk_failures.py
    "text-then-tool-use-fragmented-json", "max-tokens-mid-tool-input")]
EVERY_OFFSET_UP_TO = 3000
"""Bodies up to this size are also split in two at every byte offset."""


def _ids(cs: list[Case]) -> list[str]:
    return [c.id for c in cs]


def _result(c: Case, pieces: list[bytes]) -> tuple[Outcome, Assembled]:
    out = drive(c.api, pieces)
    return out, assemble(c.api, out.events)


def _fingerprint(out: Outcome, asm: Assembled) -> tuple[Any, ...]:
    err = None if out.error is None else (type(out.error).__name__, out.error.message, out.error.retryable)
    step = None if asm.step is None else (asm.step.stop_reason, asm.step.raw_stop_reason, asm.step.usage)
    return ([b.model_dump() for b in asm.blocks], asm.closed, step, err)


def _expected_stop(c: Case) -> str:
    exp = c.meta["expected"]
    if c.api == "anthropic-messages":
        return anthropic.map_stop_reason(exp["stop_reason"])
    if c.api == "openai-chat":
        choice = exp["choices"][0]
        calls = choice["message"].get("tool_calls")
        refused = bool(choice["message"].get("refusal"))  # streamed as delta.refusal: our stop is refusal
        return {"tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}.get(
            choice["finish_reason"], "tool_use" if calls else "refusal" if refused else "end_turn")
    has_calls = any(item.get("type") == "function_call" for item in exp["output"])
    return "tool_use" if has_calls else "end_turn"


@pytest.mark.parametrize("c", OK, ids=_ids(OK))
def test_blocks_equal_what_the_sdk_assembled(c: Case) -> None:
    out, asm = _result(c, [c.body])
    assert out.error is None
    assert asm.step is not None, "the step must end on the provider's final event"
    assert asm.closed == len(asm.blocks), "every block of a complete stream is closed"
    assert normalise(c.api, asm.blocks) == expected(c)
    assert asm.step.stop_reason == _expected_stop(c)
    for b in asm.blocks:
        if isinstance(b, ToolUseBlock):
            assert b.input_error is None


@pytest.mark.parametrize("c", OK, ids=_ids(OK))
def test_usage_is_reported(c: Case) -> None:
    _, asm = _result(c, [c.body])
    assert asm.step is not None
    usage, exp = asm.step.usage, c.meta["expected"].get("usage") or {}
    if c.api == "anthropic-messages":
        assert usage.output_tokens == exp.get("output_tokens", 0)
        assert usage.input_tokens == exp.get("input_tokens", 0)
        assert usage.cache_read_input_tokens == (exp.get("cache_read_input_tokens") or 0)
    elif c.api == "openai-chat":
        assert usage.input_tokens == exp.get("prompt_tokens", 0)
        assert usage.output_tokens == exp.get("completion_tokens", 0)
        cached = (exp.get("prompt_tokens_details") or {}).get("cached_tokens") or exp.get("prompt_cache_hit_tokens")
        assert usage.cache_read_input_tokens == (cached or 0)
    else:
        assert usage.input_tokens == exp.get("input_tokens", 0)
        assert usage.output_tokens == exp.get("output_tokens", 0)
        assert usage.cache_read_input_tokens == ((exp.get("input_tokens_details") or {}).get("cached_tokens") or 0)


@pytest.mark.parametrize("c", ALL, ids=_ids(ALL))
def test_every_split_gives_the_same_result(c: Case) -> None:
    body = c.body
    reference = _fingerprint(*_result(c, [body]))
    # one byte at a time: every offset is a cut, mid-UTF-8 and between \r and \n included
    assert _fingerprint(*_result(c, [body[i:i + 1] for i in range(len(body))])) == reference
    rng = random.Random(c.id)
    small = len(body) <= EVERY_OFFSET_UP_TO
    offsets = list(range(1, len(body))) if small else rng.sample(range(1, len(body)), 64)
    for k in offsets:
        assert _fingerprint(*_result(c, split_at(body, [k]))) == reference, f"split at byte {k}"
    for seed in range(6):
        assert _fingerprint(*_result(c, random_pieces(body, seed, max_piece=rng.choice((3, 17, 64, 512))))) \
            == reference, f"random pieces, seed {seed}"


TOOL_CASES = [c for c in ALL if any(isinstance(b, ToolUseBlock) for b in _result(c, [c.body])[1].blocks)
              and _result(c, [c.body])[0].error is None]


@pytest.mark.parametrize("c", TOOL_CASES, ids=_ids(TOOL_CASES))
def test_follow_up_request_is_valid_and_carries_the_same_inputs(c: Case) -> None:
    _, asm = _result(c, [c.body])
    body = follow_up_body(c.api, asm.blocks)
    assert validator(c.api)(body) is None
    calls = {b.tool_use_id: b.input for b in asm.blocks if isinstance(b, ToolUseBlock)}
    assert inputs_sent(c.api, body) == calls


def test_every_recorded_stream_is_covered() -> None:
    assert len(ALL) == 86
    assert {c.api for c in ALL} == {"anthropic-messages", "openai-chat", "openai-responses"}
    assert len(TOOL_CASES) >= 40
