"""Issue 14: what servers other people wrote sent, fed to every adapter it applies to.

The bodies are in ``tests/fixtures/interop/`` (its README and ``index.json`` say what produced each
and what is odd). Parsers are driven as their providers drive them (``tests.support.replay.drive``),
split into random pieces; bodies that decide things at the HTTP level are served over loopback.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.body_server import serving
from tests.support.mock_provider import free_port
from tests.support.paths import REPO
from tests.support.replay import assemble, drive, follow_up_body, random_pieces
from turnstream import Agent, tool
from turnstream.blocks import TextBlock, ToolResultBlock, ToolUseBlock, Usage
from turnstream.errors import ProviderError, ProviderProtocolError, ProviderStatusError, ProviderStreamError, UsageError
from turnstream.events import TurnComplete
from turnstream.limits import Limits
from turnstream.mock.validate import openai_chat_errors, openai_responses_errors
from turnstream.providers import openai_chat
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Delta, Message, ModelRequest, Provider
from turnstream.providers.http import redact_headers, status_of
from turnstream.providers.openai_chat import OpenAIChatProvider, stream_error
from turnstream.providers.openai_responses import OpenAIResponsesProvider
from turnstream.retry import RetryPolicy, stream_with_retries

FIXTURES = REPO / "tests" / "fixtures" / "interop"
INDEX: dict[str, dict[str, Any]] = json.loads((FIXTURES / "index.json").read_text())
SEEDS = range(8)


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_every_fixture_is_described() -> None:
    files = {p.name for p in FIXTURES.iterdir() if p.name not in ("index.json", "README.md")}
    assert files == set(INDEX)
    for name, meta in INDEX.items():
        assert meta["produced_by"] and meta["odd"] and isinstance(meta["status"], int), name
        assert meta["captured"] or meta["reconstructed"], name


# -- 1. the assistant tool-call message carries "content": "" --------------------------------

def test_assistant_tool_call_message_without_text_has_empty_string_content() -> None:
    # llama-cpp-python answers null with 500 (llama-cpp-python-500-content-null.json) and a missing
    # key with an empty body; "" is the one form it and every other server accept.
    call = ToolUseBlock(tool_use_id="call_1", name="get_weather", input={"city": "Paris"},
                        raw_input='{"city": "Paris"}')
    req = ModelRequest("m", [Message("user", ["q"]), Message("assistant", [call]),
                             Message("user", [ToolResultBlock(tool_use_id="call_1", content="sunny")])])
    body_ = openai_chat.request_body(req, openai_native=False)
    assistant = body_["messages"][1]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "call_1"
    assert openai_chat_errors(body_) is None


# -- 2. digit-string error codes are statuses --------------------------------------------------

def test_litellm_error_chunk_with_string_code_is_retried() -> None:
    raw = body("litellm-chat-error-chunk-code-string.sse")
    for seed in SEEDS:
        out = drive("openai-chat", random_pieces(raw, seed))
        assert isinstance(out.error, ProviderStreamError)
        assert (out.error.status, out.error.error_type, out.error.retryable) == (500, None, True)
        assert out.error.message.endswith("OpenAIException - Overloaded")
        text = "".join(e.value for e in out.events if isinstance(e, Delta) and e.kind == "text")
        assert text == "Let me l", "the text before the error still came out"


@pytest.mark.parametrize(("code", "status", "retryable"), [
    ("500", 500, True), ("503", 503, True), ("529", 529, True), ("429", 429, True), ("408", 408, True),
    ("400", 400, False), ("404", 404, False), (502, 502, True), (401, 401, False),
    ("rate_limit_exceeded", 200, True), ("invalid_api_key", 200, False), ("5000", 200, False), (True, 200, False),
])
def test_error_codes(code: Any, status: int, retryable: bool) -> None:
    err = stream_error({"message": "m", "type": None, "code": code})
    assert (err.status, err.retryable) == (status, retryable)
    assert status_of(code) == (status if status != 200 else None)


def test_responses_error_event_with_string_code_is_retried() -> None:
    # The Responses adapter reads in-band errors with the same function.
    raw = b'data: {"type":"error","error":{"message":"Overloaded","type":null,"code":"500"}}\n\n'
    out = drive("openai-responses", [raw])
    assert isinstance(out.error, ProviderStreamError) and (out.error.status, out.error.retryable) == (500, True)


# -- 3 and 5. a 200 that is not an event stream, on every adapter -----------------------------

APIS = ["anthropic", "openai", "openai-responses"]


def provider(api: str, base_url: str) -> Provider:
    if api == "anthropic":
        return AnthropicProvider("m", api_key="k", base_url=base_url)
    if api == "openai":
        return OpenAIChatProvider("m", api_key="k", base_url=base_url + "/v1")
    return OpenAIResponsesProvider("m", api_key="k", base_url=base_url + "/v1")


async def attempt(api: str, base_url: str) -> ProviderError:
    p = provider(api, base_url)
    waits: list[float] = []

    async def no_sleep(s: float) -> None:
        waits.append(s)

    try:
        with pytest.raises(ProviderError) as info:
            async for _ in stream_with_retries(p, ModelRequest("m", [Message("user", ["q"])]),
                                               RetryPolicy(base_delay=0.0, max_delay=0.0), sleep=no_sleep):
                pass
    finally:
        await p.aclose()
    return info.value


@pytest.mark.parametrize("api", APIS)
async def test_litellm_200_json_error_is_read_as_the_error_it_holds(api: str) -> None:
    with serving(body("litellm-messages-200-json-error.json"), content_type="application/json") as srv:
        err = await attempt(api, srv.base_url)
    assert isinstance(err, ProviderStatusError)
    assert (err.status, err.error_type, err.retryable) == (200, "api_error", True)
    assert err.message.startswith("litellm.APIError: APIError: OpenAIException - ")
    assert len(srv.requests) == 5, "retried by its type: 1 + 4 retries"


@pytest.mark.parametrize("api", APIS)
async def test_not_found_under_event_stream_is_a_protocol_error_with_the_body(api: str) -> None:
    with serving(body("ors-not-found-as-event-stream.sse")) as srv:
        err = await attempt(api, srv.base_url)
    assert isinstance(err, ProviderProtocolError) and not err.retryable
    assert err.message == "the server answered HTTP 200 with a body that is not an event stream: b'Not Found'"
    assert len(srv.requests) == 1, "the same request gets the same answer: not retried"


@pytest.mark.parametrize("api", APIS)
async def test_empty_200_says_what_llama_cpp_needs(api: str) -> None:
    with serving(body("llama-cpp-python-empty-body.sse")) as srv:
        err = await attempt(api, srv.base_url)
    # Retried (a gateway's dropped upstream looks the same, and the next attempt may succeed),
    # then the hint: 1 + 4 attempts.
    assert isinstance(err, ProviderProtocolError) and err.retryable and len(srv.requests) == 5
    assert "empty body" in err.message and 'tool_choice "auto"' in err.message
    assert "docs/compatibility.md" in err.message


@pytest.mark.parametrize("api", APIS)
async def test_200_json_that_is_not_an_error_is_a_protocol_error(api: str) -> None:
    completion = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}'
    with serving(completion, content_type="application/json") as srv:
        err = await attempt(api, srv.base_url)
    assert isinstance(err, ProviderProtocolError) and "chat.completion" in err.message and not err.retryable


def test_the_docs_the_message_points_to_exist() -> None:
    text = (REPO / "docs" / "compatibility.md").read_text()
    assert "llama-cpp-python" in text and "tool_choice" in text


# -- 4. Responses items that were never announced ----------------------------------------------

def test_ors_function_calls_are_taken_from_the_final_output(caplog: pytest.LogCaptureFixture) -> None:
    raw = body("ors-unannounced-function-calls.sse")
    for seed in SEEDS:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="turnstream.providers.openai_responses"):
            out = drive("openai-responses", random_pieces(raw, seed))
        assert out.error is None
        asm = assemble("openai-responses", out.events)
        assert asm.step is not None and asm.step.stop_reason == "tool_use"
        calls = [(b.tool_use_id, b.name, b.input) for b in asm.blocks if isinstance(b, ToolUseBlock)]
        assert calls == [("call_p4r1s", "get_weather", {"city": "Paris"}),
                         ("call_t0ky0", "get_weather", {"city": "Tokyo"})]
        # The message streamed (an empty delta), so its stale "(No update)" in the output is not taken.
        assert not any(isinstance(b, TextBlock) for b in asm.blocks)
        assert [b.seq for b in asm.blocks] == list(range(len(asm.blocks)))
        assert "never announced" in caplog.text and "call_p4r1s" in caplog.text
    follow = follow_up_body("openai-responses", asm.blocks)
    assert openai_responses_errors(follow) is None


def test_ors_text_streams_although_never_announced() -> None:
    raw = body("ors-unannounced-text.sse")
    for seed in SEEDS:
        out = drive("openai-responses", random_pieces(raw, seed))
        asm = assemble("openai-responses", out.events)
        assert out.error is None and asm.step is not None and asm.step.stop_reason == "end_turn"
        assert [(type(b), getattr(b, "text", None)) for b in asm.blocks] == [(TextBlock, "Sunny in Paris today.")]
        assert sum(1 for e in out.events if isinstance(e, Delta)) > 1, "streamed, not at the end"


def test_unannounced_call_alone_is_not_a_silent_empty_turn() -> None:
    # The smallest form of the report: an argument delta for an unknown item, then completed.
    raw = (b'data: {"type":"response.function_call_arguments.delta","item_id":"x","output_index":0,'
           b'"delta":"{\\"a\\":1}"}\n\n'
           b'data: {"type":"response.completed","response":{"status":"completed","output":[{"type":'
           b'"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{\\"a\\":1}"}]}}\n\n')
    asm = assemble("openai-responses", drive("openai-responses", [raw]).events)
    assert asm.step is not None and asm.step.stop_reason == "tool_use"
    assert [(b.tool_use_id, b.input) for b in asm.blocks if isinstance(b, ToolUseBlock)] == [("call_1", {"a": 1})]


# -- 7. usage unknown ----------------------------------------------------------------------------

@pytest.mark.parametrize(("api", "name"), [("openai-chat", "llama-cpp-python-stream-no-usage.sse"),
                                           ("openai-responses", "ors-unannounced-text.sse")])
def test_a_server_that_sends_no_usage_gives_unknown_usage(api: str, name: str) -> None:
    asm = assemble(api, drive(api, [body(name)]).events)
    assert asm.step is not None and asm.step.usage.unknown
    assert asm.step.usage.model_dump()["unknown"] is True


def test_anthropic_without_usage_is_unknown() -> None:
    raw = (b'event: message_start\ndata: {"type":"message_start","message":{"content":[]}}\n\n'
           b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
           b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    asm = assemble("anthropic-messages", drive("anthropic-messages", [raw]).events)
    assert asm.step is not None and asm.step.usage.unknown


def test_reported_usage_keeps_its_serialised_form() -> None:
    assert Usage(input_tokens=3).model_dump() == {"input_tokens": 3, "output_tokens": 0,
                                                  "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    assert "unknown" not in Usage().model_dump_json()
    total = Usage(input_tokens=3, output_tokens=2) + Usage(unknown=True)
    assert (total.input_tokens, total.output_tokens, total.unknown) == (3, 2, True)
    assert Usage.model_validate(total.model_dump()) == total
    assert not (Usage(input_tokens=1) + Usage(input_tokens=2)).unknown


# -- 1 and 7 through the loop: a fake with llama-cpp-python's request rule ------------------------

@pytest.fixture
def llama_like() -> Iterator[Any]:
    """Answers as llama-cpp-python does: a tool call (no usage) first; then, for the follow-up,
    500 when the assistant's content is null, an empty body when it is missing, text when a string."""
    seen: list[dict[str, Any]] = []

    async def chat(request: Request) -> Response:
        req = json.loads(await request.body())
        seen.append(req)
        assistant = [m for m in req["messages"] if m["role"] == "assistant"]
        if not assistant:
            return Response(body("llama-cpp-python-stream-no-usage.sse"), media_type="text/event-stream")
        if "content" not in assistant[-1]:
            return Response(b"", media_type="text/event-stream")
        if assistant[-1]["content"] is None:
            return Response(body("llama-cpp-python-500-content-null.json"), 500, media_type="application/json")
        done = json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": "Sunny."}, "finish_reason": "stop"}]})
        return Response(f"data: {done}\r\n\r\ndata: [DONE]\r\n\r\n".encode(), media_type="text/event-stream")

    port = free_port()
    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:  # until the socket listens, bounded
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/v1", seen
    server.should_exit = True
    thread.join(timeout=10)


async def test_llama_cpp_tool_loop_finishes_with_unknown_usage(llama_like: Any) -> None:
    base_url, seen = llama_like

    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    p = OpenAIChatProvider("qwen", api_key="none", base_url=base_url)
    agent = Agent(p, tools=[get_weather], limits=Limits(retry=RetryPolicy(base_delay=0.0, max_delay=0.0)))
    try:
        events = [ev async for ev in agent.stream("Weather in Paris?")]
    finally:
        await p.aclose()
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert (done.status, done.stop_reason) == ("complete", "end_turn")
    assert len(seen) == 2 and seen[1]["messages"][1]["content"] == ""
    assert done.data()["usage"]["unknown"] is True


# -- Portkey's gateway: what it sends for an upstream error or drop, and the headers it routes by --

def test_a_finish_reason_that_names_an_error_is_an_error_not_a_finished_step() -> None:
    # Portkey turns Anthropic's overloaded_error event into finish_reason "overloaded_error"
    # after a half-streamed call with empty arguments: the call must never run.
    raw = body("portkey-chat-error-as-finish-reason.sse")
    for seed in SEEDS:
        out = drive("openai-chat", random_pieces(raw, seed))
        assert isinstance(out.error, ProviderStreamError)
        assert (out.error.error_type, out.error.retryable) == ("overloaded_error", True)
        assert "overloaded_error" in out.error.message


@pytest.mark.parametrize("api", APIS)
async def test_an_empty_200_from_a_gateway_is_retried(api: str) -> None:
    with serving(body("portkey-responses-upstream-drop-empty.sse")) as srv:
        err = await attempt(api, srv.base_url)
    assert isinstance(err, ProviderProtocolError) and err.retryable and len(srv.requests) == 5


@pytest.mark.parametrize("api", APIS)
async def test_custom_headers_go_with_every_request(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    variable = "ANTHROPIC_CUSTOM_HEADERS" if api == "anthropic" else "OPENAI_CUSTOM_HEADERS"
    monkeypatch.setenv(variable, "x-portkey-provider: anthropic\n\nX-Portkey-Custom-Host: http://h:1/v1\n")
    with serving(body("portkey-responses-upstream-drop-empty.sse")) as srv:
        await attempt(api, srv.base_url)
        p = {"anthropic": AnthropicProvider, "openai": OpenAIChatProvider,
             "openai-responses": OpenAIResponsesProvider}[api]("m", api_key="k", base_url=srv.base_url,
                                                                headers={"x-route": "a"})
        assert p._headers["x-route"] == "a" and "x-portkey-provider" not in p._headers  # headers= wins
        await p.aclose()
    sent = srv.headers[0]
    assert (sent["x-portkey-provider"], sent["x-portkey-custom-host"]) == ("anthropic", "http://h:1/v1")


@pytest.mark.parametrize(("value", "why"), [("no colon here", "Name: value"), ("bad name: v", "not a header name")])
def test_custom_headers_that_do_not_parse_say_where(value: str, why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", value)
    with pytest.raises(UsageError, match=why) as info:
        OpenAIChatProvider("m", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert "OPENAI_CUSTOM_HEADERS" in str(info.value)


def test_a_gateway_key_in_a_custom_header_is_not_logged() -> None:
    shown = redact_headers({"x-portkey-api-key": "pk-secret", "x-portkey-provider": "openai",
                            "authorization": "Bearer s"})
    assert shown == {"x-portkey-api-key": "***", "x-portkey-provider": "openai", "authorization": "***"}
