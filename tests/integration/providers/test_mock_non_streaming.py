"""``turnstream mock-provider`` answers a request without ``"stream": true`` with each API's JSON
object (what a gateway such as LiteLLM asks its backend for on some routes), from the same
scenario and with the same faults."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from tests.support.mock_provider import MockHandle

STEP: dict[str, Any] = {"fragment_size": 3, "steps": [{"blocks": [
    {"type": "thinking", "thinking": "Hmm.", "signature": "sig-1"},
    {"type": "text", "text": "Looking."},
    {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}, "id": "call_1"},
    {"type": "tool_use", "name": "get_time", "input": {}, "id": "call_2"}],
    "usage": {"input_tokens": 7, "output_tokens": 5}}]}
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "openai-responses": "/v1/responses"}


def request(api: str, model: str, **extra: Any) -> dict[str, Any]:
    if api == "openai-responses":
        return {"model": model, "input": [{"role": "user", "content": "q"}], **extra}
    return {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "q"}], **extra}


def post(mock: MockHandle, api: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(mock.base_url + PATHS[api], json=body, timeout=10)


@pytest.mark.parametrize("stream", [None, False])
def test_anthropic_message(mock_provider: MockHandle, scenario_name: str, stream: bool | None) -> None:
    name = mock_provider.scenario(scenario_name, STEP)
    extra = {} if stream is None else {"stream": stream}
    r = post(mock_provider, "anthropic", request("anthropic", name, **extra))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert (doc["type"], doc["role"], doc["stop_reason"]) == ("message", "assistant", "tool_use")
    assert doc["content"] == [{"type": "thinking", "thinking": "Hmm.", "signature": "sig-1"},
                              {"type": "text", "text": "Looking."},
                              {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
                              {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}]
    assert (doc["usage"]["input_tokens"], doc["usage"]["output_tokens"]) == (7, 5)


def test_chat_completion(mock_provider: MockHandle, scenario_name: str) -> None:
    name = mock_provider.scenario(scenario_name, STEP)
    doc = post(mock_provider, "openai", request("openai", name, stream=False)).json()
    assert doc["object"] == "chat.completion"
    choice = doc["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert (msg["content"], msg["reasoning_content"]) == ("Looking.", "Hmm.")
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in msg["tool_calls"]] == [
        ("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", "{}")]
    assert (doc["usage"]["prompt_tokens"], doc["usage"]["completion_tokens"]) == (7, 5)


def test_responses_object_is_what_the_stream_completes_with(mock_provider: MockHandle, scenario_name: str) -> None:
    name = mock_provider.scenario(scenario_name, STEP)
    doc = post(mock_provider, "openai-responses", request("openai-responses", name)).json()
    streamed = post(mock_provider, "openai-responses", request("openai-responses", name, stream=True)).text
    completed = [line for line in streamed.splitlines() if line.startswith('data: {"type":"response.completed"')]
    assert len(completed) == 1
    final = httpx.Response(200, content=completed[0][6:]).json()["response"]
    assert (doc["object"], doc["status"]) == ("response", "completed")
    assert [i["type"] for i in doc["output"]] == [i["type"] for i in final["output"]] == [
        "reasoning", "message", "function_call", "function_call"]
    assert doc["usage"] == final["usage"]


@pytest.mark.parametrize("api", list(PATHS))
def test_faults_without_streaming(mock_provider: MockHandle, scenario_name: str, api: str) -> None:
    blocks = [{"type": "text", "text": "hello there, this is long enough to be cut"}]
    spec = {"turns": [[{"blocks": blocks, "fault": {"kind": kind, **extra}}] for kind, extra in [
        ("status", {"status": 503, "retry_after": 2}), ("error_event", {}), ("malformed", {})]]}
    # One user turn per fault: the turn index is the number of user messages.
    name = mock_provider.scenario(f"{scenario_name}-{api}", spec)

    def nth(n: int) -> httpx.Response:
        body = request(api, name)
        key = "input" if api == "openai-responses" else "messages"
        body[key] = [*[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}] * (n - 1),
                     {"role": "user", "content": "q"}]
        return post(mock_provider, api, body)

    r = nth(1)
    assert (r.status_code, r.headers.get("retry-after")) == (503, "2")
    r = nth(2)
    assert r.status_code == 529 and "Overloaded" in r.text
    r = nth(3)
    assert r.status_code == 200
    with pytest.raises(ValueError):
        r.json()
    assert nth(3).json(), "the fault applies to the first attempt only"
