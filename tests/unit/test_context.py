"""The context window's pure parts: the table, the estimate, clearing, the "too long" refusals
(the mock's bytes, recognised by the adapters' error parsing)."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstream.blocks import CompactionBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Usage
from turnstream.chat.render import context_notice
from turnstream.context.clearing import clear_tool_results, cleared_already
from turnstream.context.compaction import conversation_text, plan
from turnstream.context.estimate import (
    ATTACHMENT_TOKENS,
    CONSERVATIVE_CHARS_PER_TOKEN,
    TokenEstimator,
    messages_chars,
    request_chars,
)
from turnstream.context.fit import RATES, ContextFit
from turnstream.context.overflow import is_context_overflow, stated_window
from turnstream.context.windows import DEFAULT_CONTEXT_TOKENS, SEEN, context_window, input_budget
from turnstream.errors import ProviderStatusError
from turnstream.events import ContextManaged
from turnstream.limits import Limits
from turnstream.mock import context_rules
from turnstream.mock.server import MockProvider
from turnstream.providers.base import Message, ModelRequest, ToolSpec
from turnstream.providers.http import _error_from_body
from turnstream.providers.openai_chat import stream_error
from turnstream.server.agui import CONTEXT_EVENT, AGUIEncoder
from turnstream.server.aisdk import CONTEXT_PART, UIMessageStreamEncoder
from turnstream.transcript import build, latest_compaction


def test_windows_by_name_prefix_and_default() -> None:
    assert context_window("anthropic:claude-sonnet-4-5-20250929") == 200_000
    assert context_window("openai-responses:gpt-5") == 400_000
    assert context_window("openai:gpt-4o-mini-2024-07-18") == 128_000
    assert context_window("anthropic:notebook-mock-8k") == context_window("openai:mock-8k") == 8_192
    assert context_window("openai-compatible:qwen3-coder") == DEFAULT_CONTEXT_TOKENS
    assert context_window("openai-compatible:qwen3-coder", default=4096) == 4096
    assert context_window("openai:mock-8k-notebook") == 8_192


def test_the_budget_leaves_room_for_the_answer() -> None:
    assert input_budget(8_192, 1_024, 0.8) == int(7_168 * 0.8)
    assert input_budget(8_192, 64_000, 0.8) == int(819 * 0.8)  # a max_tokens past the window


def _turns(n: int, result_chars: int) -> list[Message]:
    out = [Message("user", ["analyse the data"])]
    for i in range(n):
        out.append(Message("assistant", [ThinkingBlock(seq=0, step=i, thinking="hm", signature="sig"),
                                         ToolUseBlock(seq=1, step=i, tool_use_id=f"t{i}", name="run_cell",
                                                      input={"cell": i})]))
        out.append(Message("user", [ToolResultBlock(seq=2, step=i, tool_use_id=f"t{i}", content="x" * result_chars)]))
    return out


def test_the_estimate_is_calibrated_by_the_providers_count() -> None:
    est = TokenEstimator()
    msgs = _turns(3, 4_000)
    chars, media = messages_chars(msgs)
    assert est.tokens(chars) == int(chars / CONSERVATIVE_CHARS_PER_TOKEN) + 1  # nothing measured yet
    est.calibrate(chars, media, chars // 4)  # the provider counted four characters a token
    assert est.measured and 3.9 < est.chars_per_token < 4.1
    grown = _turns(4, 4_000)
    grown_chars, _ = messages_chars(grown)
    # the previous count, plus only what is new at the measured rate
    assert abs(est.tokens(grown_chars) - (chars // 4 + (grown_chars - chars) / 4)) < 3
    est.calibrate(10, 2, 2 * ATTACHMENT_TOKENS)  # a usage that says nothing of the text keeps the rate
    assert 3.9 < est.chars_per_token < 4.1


def test_a_request_counts_its_system_prompt_and_tools() -> None:
    bare = ModelRequest(model="m", messages=[Message("user", ["hi"])])
    full = ModelRequest(model="m", messages=[Message("user", ["hi"])], system="s" * 100,
                        tools=[ToolSpec("run_cell", "runs a cell", {"type": "object"})])
    assert request_chars(full)[0] > request_chars(bare)[0] + 100


def test_clearing_starts_with_the_oldest_and_keeps_the_pairs() -> None:
    msgs = _turns(4, 10_000)
    keep_from = len(msgs) - 1  # the last step's result: the model has not seen it
    out, cleared = clear_tool_results(msgs, 15_000, keep_from=keep_from, chars_per_token=4)
    assert [c.tool_use_id for c in cleared] == ["t0", "t1"]
    assert all(c.name == "run_cell" and c.chars == 10_000 for c in cleared)
    r0 = out[2].blocks[0]
    assert isinstance(r0, ToolResultBlock) and r0.tool_use_id == "t0"
    assert r0.content == ("[cleared to fit the model's context: 10,000 characters of run_cell output; "
                          "run it again to see it]")
    assert out[-1] is msgs[-1] and out[1] is msgs[1]  # the newest result and the assistant's blocks untouched
    assert isinstance(msgs[2].blocks[0], ToolResultBlock) and msgs[2].blocks[0].content == "x" * 10_000  # a copy


def test_what_cannot_be_cleared_is_said() -> None:
    msgs = _turns(2, 10_000)
    out, cleared = clear_tool_results(msgs, 10**9, keep_from=len(msgs) - 1, chars_per_token=4)
    assert [c.tool_use_id for c in cleared] == ["t0"]
    again, more = clear_tool_results(out, 10**9, keep_from=len(out) - 1, chars_per_token=4)
    assert more == [] and again == out  # a cleared result is not cleared twice


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 5_000), min_size=1, max_size=8), excess=st.integers(0, 40_000),
       keep=st.integers(0, 8))
def test_clearing_never_breaks_a_transcript(sizes: list[int], excess: int, keep: int) -> None:
    msgs = [Message("user", ["go"])]
    for i, n in enumerate(sizes):
        msgs.append(Message("assistant", [TextBlock(seq=0, step=i, text="on it"),
                                          ToolUseBlock(seq=1, step=i, tool_use_id=f"t{i}", name="read_file")]))
        msgs.append(Message("user", [ToolResultBlock(seq=2, step=i, tool_use_id=f"t{i}", content="y" * n)]))
    keep_from = max(1, len(msgs) - 2 * keep)
    out, cleared = clear_tool_results(msgs, excess, keep_from=keep_from, chars_per_token=4)
    assert len(out) == len(msgs)
    for before, after in zip(msgs, out, strict=True):
        assert before.role == after.role
        assert [getattr(b, "tool_use_id", None) for b in before.blocks] == \
               [getattr(b, "tool_use_id", None) for b in after.blocks]
        if before.role == "assistant":
            assert after is before
    assert out[keep_from:] == msgs[keep_from:]
    before_chars, after_chars = messages_chars(msgs)[0], messages_chars(out)[0]
    assert before_chars - after_chars >= min(excess, sum(c.chars for c in cleared) - 200 * len(cleared))
    if cleared:  # each cleared result was bigger than its note, and they go oldest first
        ids = [c.tool_use_id for c in cleared]
        assert ids == sorted(ids, key=lambda t: int(t[1:]))
        assert all(cleared_already(b.content) for m in out for b in m.blocks
                   if isinstance(b, ToolResultBlock) and b.tool_use_id in ids)


async def _post(path: str, body: dict[str, Any]) -> httpx.Response:
    app = MockProvider().app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://mock") as c:
        return await c.post(path, json=body)


def _big(n: int) -> str:
    return "word " * n


async def test_the_mock_refuses_each_api_as_it_does() -> None:
    text = _big(8_000)  # 40,000 bytes: about 10,000 tokens, past 8k
    a = await _post("/v1/messages", {"model": "mock-8k", "max_tokens": 1024, "stream": True,
                                     "messages": [{"role": "user", "content": text}]})
    assert a.status_code == 400
    err = a.json()["error"]
    assert err["type"] == "invalid_request_error" and err["message"].startswith("prompt is too long: ")
    assert err["message"].endswith(" tokens > 8192 maximum")
    c = await _post("/v1/chat/completions", {"model": "mock-8k", "stream": True,
                                             "messages": [{"role": "user", "content": text}]})
    assert c.status_code == 400 and c.json()["error"]["code"] == "context_length_exceeded"
    assert c.json()["error"]["message"].startswith("This model's maximum context length is 8192 tokens.")
    r = await _post("/v1/responses", {"model": "mock-8k", "stream": True, "input": text})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"
    for resp in (a, c, r):
        assert is_context_overflow(_error_from_body(400, resp.content, {}))


async def test_input_and_max_tokens_share_the_window() -> None:
    text = _big(5_600)  # about 7,000 tokens: fits 8k alone, not with 2,048 more
    a = await _post("/v1/messages", {"model": "mock-8k", "max_tokens": 2048, "stream": True,
                                     "messages": [{"role": "user", "content": text}]})
    assert a.status_code == 400
    assert a.json()["error"]["message"].startswith("input length and `max_tokens` exceed context limit: ")
    assert is_context_overflow(_error_from_body(400, a.content, {}))


async def test_a_request_that_fits_is_served_with_its_count_as_usage() -> None:
    body = {"model": "mock-8k", "max_tokens": 100, "stream": False,
            "messages": [{"role": "user", "content": "hello"}]}
    a = await _post("/v1/messages", body)
    assert a.status_code == 200
    assert a.json()["usage"]["input_tokens"] == context_rules.request_tokens(body)


def test_other_refusals_are_not_overflows() -> None:
    bad = orjson.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "messages.1: tool_use ids must be unique"}})
    assert not is_context_overflow(_error_from_body(400, bad, {}))
    assert not is_context_overflow(ProviderStatusError("Overloaded", status=529, error_type="overloaded_error"))
    assert not is_context_overflow(ValueError("prompt is too long"))
    in_stream = stream_error({"type": "invalid_request_error", "code": "context_length_exceeded",
                              "message": "Your input exceeds the context window of this model."})
    assert is_context_overflow(in_stream)
    llama = orjson.dumps({"error": {"code": 400, "type": "exceed_context_size_error",
                                    "message": "the request exceeds the available context size"}})
    assert is_context_overflow(_error_from_body(400, llama, {}))


def _request(n: int, result_chars: int, max_tokens: int = 1024) -> ModelRequest:
    return ModelRequest(model="mock-8k", messages=_turns(n, result_chars), max_tokens=max_tokens)


def test_a_request_under_the_line_is_sent_as_it_is() -> None:
    fit = ContextFit("anthropic:mock-8k", Limits(), "s-small")
    req = _request(2, 1_000)
    messages = req.messages
    assert fit.fit(req, 0) is None and req.messages is messages


def test_past_the_line_old_results_are_cleared_and_announced() -> None:
    fit = ContextFit("anthropic:mock-8k", Limits(), "s-big")
    req = _request(6, 4_000)  # ~24,000 characters: ~9,600 tokens at the conservative rate
    ev = fit.fit(req, 3)
    assert ev is not None and ev.step == 3 and ev.window == 8_192 and not ev.retry
    line = input_budget(8_192, 1024, 0.8)
    assert ev.tokens_before > line >= ev.tokens_after
    assert ev.cleared == [f"t{i}" for i in range(len(ev.cleared))]  # oldest first
    last = req.messages[-1].blocks[0]
    assert isinstance(last, ToolResultBlock) and last.content == "x" * 4_000  # not read yet: kept


def test_the_usage_calibrates_the_next_estimate_and_the_next_turn() -> None:
    RATES.pop("openai:mock-8k s-cal", None)
    fit = ContextFit("openai:mock-8k", Limits(), "s-cal")
    req = _request(5, 4_000)
    assert fit.fit(req, 0) is not None  # at 2.5 characters a token it does not fit
    fit.measured(Usage(input_tokens=fit.sent.chars // 4, output_tokens=5), "openai")
    assert 3.9 < fit.estimator.chars_per_token < 4.1 and 3.9 < RATES["openai:mock-8k s-cal"] < 4.1
    again = ContextFit("openai:mock-8k", Limits(), "s-cal")  # the session's next turn
    assert again.estimator.measured and 3.9 < again.estimator.chars_per_token < 4.1
    assert again.fit(_request(5, 4_000), 0) is None  # at 4 a token it fits: nothing cleared


def test_a_refusal_fits_against_half_the_line() -> None:
    fit = ContextFit("anthropic:mock-8k", Limits(), "s-refused")
    req = _request(6, 2_000)
    assert fit.fit(req, 0) is None
    ev = fit.fit(req, 0, refused=True)
    assert ev is not None and ev.retry and ev.tokens_after <= input_budget(8_192, 1024, 0.8) // 2


def test_a_refusal_that_states_the_window_teaches_it() -> None:
    origin = "openai-compatible:local-llama-teach"
    SEEN.pop(origin, None)
    fit = ContextFit(origin, Limits(), "s-teach")
    assert fit.window == DEFAULT_CONTEXT_TOKENS
    vllm = orjson.dumps({"object": "error", "type": "BadRequestError", "code": 400,
                         "message": "This model's maximum context length is 4096 tokens. However, you requested "
                                    "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce "
                                    "the length of the messages or completion."})
    exc = _error_from_body(400, orjson.dumps({"error": orjson.loads(vllm)}), {})
    assert is_context_overflow(exc) and stated_window(exc) == 4096
    fit.refused(exc, origin)
    assert fit.window == 4096 and context_window(origin) == 4096  # and the next turn knows it
    SEEN.pop(origin, None)


def test_the_answer_never_asks_for_more_than_half_the_window() -> None:
    fit = ContextFit("anthropic:mock-8k", Limits(), "s-half")
    req = ModelRequest(model="mock-8k", messages=[Message("user", ["hi"])], max_tokens=8192)
    assert fit.fit(req, 1) is None and req.max_tokens == 4096
    big = ModelRequest(model="m", messages=[Message("user", ["hi"])], max_tokens=8192)
    ContextFit("anthropic:claude-sonnet-4-5", Limits(), "s-half").fit(big, 1)
    assert big.max_tokens == 8192


def _history(n: int) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for i in range(n):
        out.append((f"question {i}", [
            ToolUseBlock(seq=0, step=1, tool_use_id=f"c{i}", name="run_cell", input={"cell": i}),
            ToolResultBlock(seq=1, step=1, tool_use_id=f"c{i}", content=f"output {i} " + "z" * 1_000),
            TextBlock(seq=2, step=2, text=f"answer {i}"),
        ]))
    return out


def test_a_summary_is_sent_in_place_of_the_turns_it_covers() -> None:
    history = _history(5)
    summary = CompactionBlock(seq=3, step=1, summary="They ran five cells.", covers=3)
    history[4][1].append(summary)  # made during the fifth turn
    messages, _ = build(history, "anthropic:claude-sonnet-4-5")
    sent = json.dumps([[b if isinstance(b, str) else b.model_dump() for b in m.blocks] for m in messages])
    assert "question 0" not in sent and "question 2" not in sent and "output 1" not in sent
    assert "question 3" in sent and "question 4" in sent and "They ran five cells." in sent
    first = messages[0].blocks[0]
    assert messages[0].role == "user" and isinstance(first, str) and first.startswith("[A summary of the first 3 turns")
    assert not any(isinstance(b, CompactionBlock) for m in messages for b in m.blocks)


def test_a_newer_summary_wins_and_never_covers_its_own_turn() -> None:
    history = _history(4)
    history[1][1].append(CompactionBlock(seq=3, step=1, summary="old", covers=1))
    history[3][1].append(CompactionBlock(seq=3, step=1, summary="new", covers=99))
    covers, c = latest_compaction(history)
    assert c is not None and c.summary == "new" and covers == 3


def test_what_a_new_summary_covers_and_reads() -> None:
    assert plan(10, 0) == 8 and plan(3, 1) == 2 and plan(2, 1) == 2 - 0 and plan(1, 1) is None
    text = conversation_text(_history(3)[1:], CompactionBlock(seq=0, step=0, summary="S0", covers=1), 10_000)
    assert text.startswith("Summary of what came before:\nS0\n\nThen:\n")
    assert "User: question 1" in text and "Assistant called run_cell(" in text and "answer 2" in text
    assert "run_cell returned: output 1 " in text and "z" * 400 not in text  # results cut
    short = conversation_text(_history(30), None, 2_000)
    assert len(short) <= 2_000 and short.startswith("[…]") and "answer 29" in short  # the newest part kept


def test_the_notice_reaches_every_wire_and_both_chats() -> None:
    ev = ContextManaged(step=3, cleared=["c0", "c1"], tokens_before=7_412, tokens_after=5_120, window=8_192,
                        retry=False, summarised=12, turn_id="t", n=9)
    for version in (5, 6, 7):
        chunks = UIMessageStreamEncoder(version=version)._event(ev)  # type: ignore[arg-type]
        assert chunks == [{"type": CONTEXT_PART, "transient": True, "data": ev.data()}]
    assert AGUIEncoder(thread_id="th", run_id="r", model="m")._event(ev) == [
        {"type": "CUSTOM", "name": CONTEXT_EVENT, "value": ev.data()}]
    assert context_notice(ev) == ("✂ 2 old tool results left out of what the model reads, and the first 12 turns "
                                  "sent as a summary, to fit its context (~7,412 → ~5,120 of 8,192 tokens; the "
                                  "chat keeps them)")
    retried = ContextManaged(cleared=["c0"], tokens_before=10, tokens_after=5, window=100, retry=True)
    assert context_notice(retried).startswith("✂ the model refused the request as too long; 1 old tool result left")
