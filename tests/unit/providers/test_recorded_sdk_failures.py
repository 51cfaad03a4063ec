"""The recorded streams where the official SDK raised (``expected_error``) or accepted a stream
it should not have: what turnstream does with each, and why.

Rule of thumb: an in-band error becomes ``ProviderStreamError`` (retryable only for
server-side error types); a stream without its final event is refused with
``StreamBrokenError`` and its tool calls never run; an SDK crash on a harmless quirk
(missing ``index``, citation lists, ``response.queued`` first, rotating ids, a finish that
is not ``completed``) is a normal step here.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.replay import (
    Case,
    assemble,
    case,
    cases,
    drive,
    expected,
    final_response_output,
    normalise,
    responses_view,
)
from turnstream.blocks import TextBlock, ThinkingBlock, ToolUseBlock
from turnstream.errors import ProviderStreamError, StreamBrokenError


def _run(c: Case, body: bytes | None = None):  # type: ignore[no-untyped-def]
    out = drive(c.api, [c.body if body is None else body])
    return out, assemble(c.api, out.events)


def test_all_sdk_failures_have_an_outcome_here() -> None:
    failing = {c.id for c in cases() if c.sdk_error}
    assert failing == {
        "openai-chat/groq-tool-choice-required-error", "openai-chat/groq-tool-use-failed-midstream-error",
        "openai-chat/mistral-tool-call-no-index", "openai-chat/openai-finish-length-mid-json",
        "openai-chat/openrouter-error-chunk-after-length", "openai-chat/openrouter-sse-comments-annotations",
        "openai-responses/background-resume-starting-after", "openai-responses/error-event-then-failed",
        "openai-responses/github-copilot-rotating-item-ids", "openai-responses/xai-responses-incomplete-max-len",
    }


# -- in-band errors: ProviderStreamError, classified by the error's type ------------------

@pytest.mark.parametrize(("name", "message"), [
    ("groq-tool-choice-required-error", "Tool choice is required, but model did not call a tool"),
    ("groq-tool-use-failed-midstream-error", "Tool call validation failed: tool call validation failed: "
     "parameters for tool get_something_by_name did not match schema: errors: [missing properties: 'name', "
     "additionalProperties 'invalid_param' not allowed]"),
])
def test_groq_error_event_inside_a_chat_stream(name: str, message: str) -> None:
    # Groq ends the 200 stream with `event: error` + {"error": {...}} and no [DONE].
    c = case("openai-chat", name)
    out, asm = _run(c)
    assert isinstance(out.error, ProviderStreamError)
    assert out.error.message == message
    assert out.error.error_type == "invalid_request_error"
    assert out.error.retryable is False  # the request itself is at fault: no retry, no restart
    assert asm.step is None
    assert not any(isinstance(b, ToolUseBlock) for b in asm.blocks)
    partial = c.meta["expected_partial"]["choices"][0]["message"]
    assert "".join(b.text for b in asm.blocks if isinstance(b, TextBlock)) == (partial["content"] or "")


def test_openrouter_error_chunk_after_finish_length() -> None:
    # Two finish_reason "length" chunks, then a chunk carrying {"error": {"code": 400, ...}}, then [DONE]:
    # the error arrives before the stream's end, so the step fails.
    out, asm = _run(case("openai-chat", "openrouter-error-chunk-after-length"))
    assert isinstance(out.error, ProviderStreamError)
    assert (out.error.message, out.error.status, out.error.retryable) == ("Token limit reached", 400, False)
    assert asm.step is None


def test_responses_error_event_then_failed() -> None:
    # `error` (insufficient_quota) then response.failed: raised at the error event, never retried.
    out, asm = _run(case("openai-responses", "error-event-then-failed"))
    assert isinstance(out.error, ProviderStreamError)
    assert out.error.error_type == "insufficient_quota"
    assert out.error.message.startswith("You exceeded your current quota")
    assert out.error.retryable is False
    assert asm.step is None and asm.blocks == []


# -- SDK crashes on harmless quirks: a normal step here -----------------------------------

def test_mistral_tool_call_without_index() -> None:
    # No `index` on the tool call (the SDK raises TypeError): its position in the list is used.
    c = case("openai-chat", "mistral-tool-call-no-index")
    out, asm = _run(c)
    assert out.error is None and asm.step is not None
    assert asm.step.stop_reason == "tool_use"
    summary = c.meta["expected_summary"]["choices"][0]["tool_calls"]
    assert [(b.tool_use_id, b.name, b.input) for b in asm.blocks if isinstance(b, ToolUseBlock)] == [
        (t["id"], t["name"], json.loads(t["arguments"])) for t in summary]
    assert asm.step.usage.input_tokens == 124


def test_finish_length_is_max_tokens_not_an_error() -> None:
    # The SDK's parse helper raises LengthFinishReasonError; here it is a step cut by max_tokens.
    c = case("openai-chat", "openai-finish-length-mid-json")
    out, asm = _run(c)
    assert out.error is None and asm.step is not None
    assert asm.step.stop_reason == "max_tokens"
    assert [b.text for b in asm.blocks if isinstance(b, TextBlock)] == ['{"']
    assert (asm.step.usage.input_tokens, asm.step.usage.output_tokens) == (79, 1)


def test_openrouter_annotations_without_index_become_citations() -> None:
    # `delta.annotations` entries have no index (the SDK's list merge raises); they are citations here.
    c = case("openai-chat", "openrouter-sse-comments-annotations")
    out, asm = _run(c)
    assert out.error is None and asm.step is not None and asm.step.stop_reason == "end_turn"
    payloads = [json.loads(m) for m in re.findall(rb"^data: (\{.*\})$", c.body, re.M)]
    deltas = [ch["delta"] for p in payloads for ch in p["choices"]]
    text = "".join(d.get("content") or "" for d in deltas)
    annotations = [a for d in deltas for a in d.get("annotations") or []]
    blocks = [b for b in asm.blocks if isinstance(b, TextBlock)]
    assert "".join(b.text for b in blocks) == text and text
    assert [a for b in blocks for a in b.citations or []] == annotations and annotations


@pytest.mark.parametrize("name", ["background-resume-starting-after", "github-copilot-rotating-item-ids"])
def test_responses_streams_the_sdk_rejects_on_lifecycle_grounds(name: str) -> None:
    # A resumed stream that starts at response.queued, and one whose ids rotate per event: the
    # blocks are keyed by output_index, so both assemble to the final event's output.
    c = case("openai-responses", name)
    out, asm = _run(c)
    assert out.error is None and asm.step is not None and asm.step.stop_reason == "end_turn"
    assert normalise(c.api, asm.blocks) == responses_view(final_response_output(c.body))


def test_responses_incomplete_is_max_tokens() -> None:
    # response.incomplete (xAI's REASON_MAX_LEN) with the message never closed: the SDK has no final
    # response; here the step ends max_tokens and the open message is closed with all its text.
    c = case("openai-responses", "xai-responses-incomplete-max-len")
    out, asm = _run(c)
    assert out.error is None and asm.step is not None
    assert (asm.step.stop_reason, asm.step.raw_stop_reason) == ("max_tokens", "incomplete:REASON_MAX_LEN")
    assert asm.closed == len(asm.blocks) == 2
    text = "".join(b.text for b in asm.blocks if isinstance(b, TextBlock))
    assert text == c.meta["expected_summary"]["output_text"]
    thinking = next(b for b in asm.blocks if isinstance(b, ThinkingBlock))
    sig = json.loads(thinking.signature)
    assert sig["item"]["type"] == "reasoning" and sig["next_id"].startswith("msg_")


# -- streams without their final event: refused -------------------------------------------

@pytest.mark.parametrize("name", ["text-then-tool-use-fragmented-json", "max-tokens-mid-tool-input"])
def test_unterminated_final_event_is_refused(name: str) -> None:
    # The body's last event (message_stop) has no blank line after it. SSE drops an unterminated
    # event, and so do both SDK decoders, yet get_final_message() returns a message with a tool
    # call. turnstream refuses the stream: the step never ends, so its tool call is never run.
    c = case("anthropic-messages", name)
    assert not c.body.endswith(b"\n\n")
    out, asm = _run(c)
    assert isinstance(out.error, StreamBrokenError) and out.error.retryable
    assert asm.step is None


def test_terminated_it_equals_the_sdk_result() -> None:
    c = case("anthropic-messages", "text-then-tool-use-fragmented-json")
    out, asm = _run(c, c.body + b"\n\n")
    assert out.error is None and asm.step is not None and asm.step.stop_reason == "tool_use"
    assert normalise(c.api, asm.blocks) == expected(c)


def test_tool_input_cut_by_max_tokens_is_never_final() -> None:
    # Terminated, the max_tokens case ends the step with the tool block still open (no
    # content_block_stop): it is only a partial block, marked so it never runs. (The SDK's
    # jiter parse silently drops the half-written last string and hands out an input.)
    c = case("anthropic-messages", "max-tokens-mid-tool-input")
    out, asm = _run(c, c.body + b"\n\n")
    assert out.error is None and asm.step is not None and asm.step.stop_reason == "max_tokens"
    assert asm.closed == 1
    call = asm.blocks[-1]
    assert isinstance(call, ToolUseBlock) and call.input_error
    assert call.raw_input is not None and not call.raw_input.endswith("}")


_FINAL = {"anthropic-messages": rb'"type"\s*:\s*"message_stop"',
          "openai-chat": rb'"finish_reason"\s*:\s*"',
          "openai-responses": rb'"type"\s*:\s*"response\.(completed|incomplete)"'}


def _cut_before_final(c: Case) -> bytes:
    """The body up to the event that ends the step (for Chat: the first finish_reason chunk)."""
    m = re.search(_FINAL[c.api], c.body)
    assert m is not None
    start = c.body.rfind(b"\n\n", 0, m.start())
    return c.body[: start + 2]


COMPLETE = [c for c in cases() if re.search(_FINAL[c.api], c.body) and drive(c.api, [c.body]).error is None
            and c.body.endswith(b"\n\n")]


@pytest.mark.parametrize("c", COMPLETE, ids=[c.id for c in COMPLETE])
def test_every_stream_without_its_final_event_is_refused(c: Case) -> None:
    # Closed cleanly right before message_stop / the finish chunk / response.completed: the SDKs
    # raise nothing; turnstream raises StreamBrokenError (retryable: the loop restarts the step).
    out, asm = _run(c, _cut_before_final(c))
    assert isinstance(out.error, StreamBrokenError) and out.error.retryable
    assert asm.step is None


CHAT_DONE = [c for c in COMPLETE if c.api == "openai-chat" and c.body.rstrip().endswith(b"data: [DONE]")]


@pytest.mark.parametrize("c", CHAT_DONE, ids=[c.id for c in CHAT_DONE])
def test_chat_without_done_after_a_finish_reason_is_complete(c: Case) -> None:
    # Some compatible servers never send [DONE]: a clean close after a finish_reason is the end.
    body = c.body.rstrip()
    out, asm = _run(c, body[: -len(b"data: [DONE]")])
    _ref_out, ref = _run(c)
    assert out.error is None and asm.step is not None
    assert [b.model_dump() for b in asm.blocks] == [b.model_dump() for b in ref.blocks]
    assert asm.step.stop_reason == ref.step.stop_reason  # type: ignore[union-attr]
