"""Capture the third-party bodies under ``tests/fixtures/interop/`` from the real servers.

    .venv/bin/python -m tests.interop.capture_fixtures

Starts ``turnstream mock-provider``, LiteLLM's proxy and open-responses-server as the interop
suite does (``servers.py``), sends each request below, and keeps each response's status,
content type and body bytes exactly as they came off the socket (``aiter_raw``: no decoding).
The mock's scenarios give the backends' faults. Ids and timestamps in the bodies differ from
one capture to the next; nothing else should. The llama-cpp-python cases are not captured
here (no model can be loaded offline): they are written by hand in ``index.json``'s
``reconstructed`` entries.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import httpx2 as httpx

from tests.interop import servers
from tests.support.paths import REPO

OUT = REPO / "tests" / "fixtures" / "interop"

SCENARIOS: dict[str, Any] = {
    "error-midstream": {"fragment_size": 4, "steps": [{"blocks": [{"type": "text", "text": "Let me look at this."}],
                        "fault": {"kind": "error_event", "after_events": 3, "times": 1000}}]},
    "malformed-answer": {"steps": [{"blocks": [{"type": "text", "text": "hi there"}],
                         "fault": {"kind": "malformed", "times": 1000}}]},
    "two-calls": {"fragment_size": 6, "steps": [{"blocks": [
        {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}, "id": "call_p4r1s"},
        {"type": "tool_use", "name": "get_weather", "input": {"city": "Tokyo"}, "id": "call_t0ky0"}]}]},
    "text-only": {"fragment_size": 6, "steps": [{"blocks": [{"type": "text", "text": "Sunny in Paris today."}]}]},
}
TOOLS_CHAT = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                                "parameters": {"type": "object",
                                                               "properties": {"city": {"type": "string"}}}}}]
TOOLS_RESPONSES = [{"type": "function", "name": "get_weather", "description": "Weather for a city.",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": False}]


def capture(url: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, str, bytes]:
    headers = {**headers, "accept-encoding": "identity"}  # as turnstream asks: bodies as sent, no coding
    with httpx.Client(timeout=60) as client, client.stream("POST", url, headers=headers, json=body) as resp:
        raw = b"".join(resp.iter_raw())
        return resp.status_code, resp.headers.get("content-type", ""), raw


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    index_path = OUT / "index.json"
    index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else {}
    captured: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, servers.mock_provider(Path(tmp)) as mock:
        httpx.post(mock + "/_mock/scenarios", json=SCENARIOS).raise_for_status()
        with servers.litellm_proxy(mock) as lite:
            bearer = {"authorization": f"Bearer {servers.LITELLM_KEY}"}
            anth = {"x-api-key": servers.LITELLM_KEY, "anthropic-version": "2023-06-01"}
            captured["litellm-chat-error-chunk-code-string.sse"] = (
                "LiteLLM 1.106.2 /v1/chat/completions, backend openai/ (the mock's Chat route) failing with an "
                "error event after three chunks",
                capture(lite + "/v1/chat/completions", bearer, {
                    "model": "openai/error-midstream", "stream": True, "stream_options": {"include_usage": True},
                    "messages": [{"role": "user", "content": "hi"}]}))
            captured["litellm-messages-200-json-error.json"] = (
                "LiteLLM 1.106.2 /v1/messages (Anthropic format), backend openai/ (LiteLLM calls the mock's "
                "Responses route without streaming) answering a body cut in half",
                capture(lite + "/v1/messages", anth, {
                    "model": "openai/malformed-answer", "max_tokens": 100, "stream": True,
                    "messages": [{"role": "user", "content": "hi"}]}))
        with servers.open_responses_server(mock) as ors:
            captured["ors-not-found-as-event-stream.sse"] = (
                "open-responses-server 0.4.1 asked at /v1/responses (a base URL ending in /v1): its catch-all "
                "proxy forwards to the backend's /v1/v1/responses and streams the 404 body back",
                capture(ors + "/v1/responses", {"accept": "text/event-stream"}, {
                    "model": "text-only", "stream": True, "input": [{"type": "message", "role": "user",
                                                                     "content": "hi"}]}))
            captured["ors-unannounced-function-calls.sse"] = (
                "open-responses-server 0.4.1 /responses, backend: the mock's Chat route answering two parallel "
                "tool calls",
                capture(ors + "/responses", {"accept": "text/event-stream"}, {
                    "model": "two-calls", "stream": True, "tools": TOOLS_RESPONSES,
                    "input": [{"type": "message", "role": "user", "content": "Weather in Paris and Tokyo?"}]}))
            captured["ors-unannounced-text.sse"] = (
                "open-responses-server 0.4.1 /responses, backend: the mock's Chat route answering text",
                capture(ors + "/responses", {"accept": "text/event-stream"}, {
                    "model": "text-only", "stream": True,
                    "input": [{"type": "message", "role": "user", "content": "Weather?"}]}))
    for name, (what, (status, ctype, body)) in captured.items():
        (OUT / name).write_bytes(body)
        entry = index.get(name, {})
        entry.update({"produced_by": what, "status": status, "content_type": ctype, "captured": True})
        index[name] = entry
        print(f"{name}: {status} {ctype} {len(body)} bytes")
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
