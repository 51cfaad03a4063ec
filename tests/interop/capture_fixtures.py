"""Capture the third-party bodies under ``tests/fixtures/interop/`` from the real servers.

    .venv/bin/python -m tests.interop.capture_fixtures [litellm] [ors] [portkey]

Starts ``turnstream mock-provider`` and the servers named (all three when none is), as the
interop suite does (``servers.py``), sends each request below, and keeps each response's status,
content type and body bytes exactly as they came off the socket (``iter_raw``: no decoding).
The mock's scenarios give the backends' faults. One fixture is a request instead: what Portkey
sent its backend, taken off the socket by ``recorder()``. Ids and timestamps in the bodies differ
from one capture to the next; nothing else should. The llama-cpp-python cases are not captured
here (no model can be loaded offline): they are written by hand in ``index.json``'s
``reconstructed`` entries.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    "call-then-error": {"fragment_size": 5, "steps": [{"blocks": [
        {"type": "tool_use", "name": "get_weather", "input": {"city": "Tokyo"}, "id": "toolu_t0ky0"}],
        "fault": {"kind": "error_event", "after_events": 4, "times": 1000}}]},
    "drop-early": {"fragment_size": 5, "steps": [{"blocks": [{"type": "text", "text": "Sunny in Paris today."}],
                   "fault": {"kind": "drop", "after_bytes": 400, "times": 1000}}]},
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


@contextmanager
def recorder(answer: bytes) -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A backend on loopback that keeps each request (path, content type, body bytes) and
    answers ``answer`` with status 400, as Anthropic answers a request it refuses."""
    got: list[tuple[str, str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            got.append((self.path, self.headers.get("content-type") or "", body))
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


def portkey_headers(backend: str, host: str) -> dict[str, str]:
    return {"authorization": "Bearer mock-key", "x-portkey-provider": backend, "x-portkey-custom-host": host + "/v1"}


def _call(id_: str, city: str) -> dict[str, Any]:
    return {"id": id_, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


SPLIT_REQUEST = {
    "model": "two-calls", "stream": True,
    "messages": [
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "",
         "tool_calls": [_call("toolu_p4r1s", "Paris"), _call("toolu_t0ky0", "Tokyo")]},
        {"role": "tool", "tool_call_id": "toolu_p4r1s", "content": "sunny in Paris"},
        {"role": "tool", "tool_call_id": "toolu_t0ky0", "content": "sunny in Tokyo"}],
    "tools": TOOLS_CHAT}
REFUSAL = (b'{"type":"error","error":{"type":"invalid_request_error","message":"messages.1: `tool_use` ids were found '
           b'without `tool_result` blocks immediately after: toolu_t0ky0. Each `tool_use` block must have a '
           b'corresponding `tool_result` block in the next message."}}')


def capture_portkey(mock: str, captured: dict[str, Any]) -> None:
    with servers.portkey_gateway() as gateway:
        captured["portkey-chat-error-as-finish-reason.sse"] = (
            "Portkey's gateway 1.15.2 /v1/chat/completions, backend anthropic (the mock's Messages route) sending "
            "a tool_use block and then an error event (overloaded_error)",
            capture(gateway + "/v1/chat/completions", portkey_headers("anthropic", mock), {
                "model": "call-then-error", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "Weather in Tokyo?"}], "tools": TOOLS_CHAT}))
        captured["portkey-responses-upstream-drop-empty.sse"] = (
            "Portkey's gateway 1.15.2 /v1/responses, backend openai (the mock's Responses route) whose "
            "connection drops after 400 bytes, inside the first event",
            capture(gateway + "/v1/responses", portkey_headers("openai", mock), {
                "model": "drop-early", "stream": True,
                "input": [{"type": "message", "role": "user", "content": "Weather?"}]}))
        with recorder(REFUSAL) as (backend, got):
            capture(gateway + "/v1/chat/completions", portkey_headers("anthropic", backend), SPLIT_REQUEST)
        [(path, ctype, body)] = got
        assert path == "/v1/messages", path
        captured["portkey-chat-to-messages-split-tool-results.json"] = (
            "the request Portkey's gateway 1.15.2 sends to its anthropic backend (POST /v1/messages) for a Chat "
            "Completions request whose assistant message has two tool_calls followed by their two tool messages; "
            "Anthropic answers 400",
            (400, ctype, body))


def capture_litellm(mock: str, captured: dict[str, Any]) -> None:
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


def capture_ors(mock: str, captured: dict[str, Any]) -> None:
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


def write(captured: dict[str, Any], index: dict[str, Any], index_path: Path) -> None:
    for name, (what, (status, ctype, body)) in captured.items():
        (OUT / name).write_bytes(body)
        entry = index.get(name, {})
        entry.update({"produced_by": what, "status": status, "content_type": ctype, "captured": True})
        index[name] = entry
        print(f"{name}: {status} {ctype} {len(body)} bytes")
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=2, ensure_ascii=False) + "\n")


def main(names: list[str]) -> None:
    wanted = set(names) or {"litellm", "ors", "portkey"}
    OUT.mkdir(parents=True, exist_ok=True)
    index_path = OUT / "index.json"
    index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.exists() else {}
    captured: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, servers.mock_provider(Path(tmp)) as mock:
        httpx.post(mock + "/_mock/scenarios", json=SCENARIOS).raise_for_status()
        if "portkey" in wanted:
            capture_portkey(mock, captured)
        if "litellm" in wanted:
            capture_litellm(mock, captured)
        if "ors" in wanted:
            capture_ors(mock, captured)
    write(captured, index, index_path)


if __name__ == "__main__":
    main(sys.argv[1:])
