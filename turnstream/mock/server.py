"""``turnstream mock-provider``: a local server that speaks the providers' streaming formats.

Routes: ``POST /v1/messages`` (Anthropic), ``POST /v1/chat/completions`` (OpenAI Chat
Completions), ``POST /v1/responses`` (OpenAI Responses). Each API's wire module supplies a request view
and frames; this module applies scenario faults and serves the bytes. Test hooks:
``POST /_mock/scenarios`` registers scenarios by name (a request whose ``model`` names a
scenario plays it; any other plays the default), ``GET /_mock/requests`` lists the bodies
received, ``POST /_mock/reset`` forgets both.

A request without ``"stream": true`` (what a gateway such as LiteLLM sends on some routes) is
answered as the API answers it, with one JSON object (``message``, ``chat.completion``,
``response``), from the same scenario and with the same faults (see ``_answer``).

Invalid transcripts are refused with the provider's own 400 message (``validate.py``), and a
request too big for a small-window model (``mock-8k``) with the API's own "too long" refusal
(``context_rules.py``).
A scenario ``{"replay": "file.sse", "seed": 1}`` serves a recorded body in random pieces.

Send-time stamps: ``{{sent_at}}`` anywhere in a frame (e.g. in a scenario's text, with
``fragment_size`` 11 so that each fragment is one stamp) is replaced, as the frame is handed
to the server, by the wall-clock time (``time.time()``, six decimals). A client on the same
machine subtracts it from its own receive time: what lies between is what the code under
test added (``bench/server_bench.py``).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import SimulatedFault
from ..scenarios.engine import RequestView, Scenario, StepScript, wait_at_gate
from . import anthropic_wire, context_rules, openai_chat_wire, openai_responses_wire
from .prompt_cache import PromptCache
from .validate import anthropic_errors, openai_chat_errors, openai_responses_errors

SENT_AT = b"{{sent_at}}"
"""Replaced in a frame by its send time (see the module docstring)."""


@dataclass(slots=True)
class WireFormat:
    """What the mock needs to serve one API."""

    view: Callable[..., RequestView]
    """The request as the scenario engine reads it (``steering=`` the scenario's rule)."""
    frames: Callable[..., list[bytes]]
    answer: Callable[..., dict[str, Any]]
    """The non-streaming answer: the step as one JSON object."""
    validate: Callable[[dict[str, Any]], str | None]
    error_body: Callable[[str, str], dict[str, Any]]
    error_frame: Callable[[str, str], bytes]
    malformed: bytes
    id_prefix: str
    msg_id: Callable[[], str]
    too_long: Callable[[int, int, int], dict[str, Any] | None]
    """The API's refusal of a request of (tokens, max_tokens) past a window, or None."""


ANTHROPIC = WireFormat(
    view=anthropic_wire.request_view,
    frames=anthropic_wire.frames,
    answer=anthropic_wire.message,
    validate=anthropic_errors,
    error_body=anthropic_wire.error_body,
    error_frame=anthropic_wire.error_frame,
    malformed=b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"ty\n\n',
    id_prefix="toolu_mock_",
    msg_id=lambda: "msg_mock_" + uuid.uuid4().hex[:16],
    too_long=context_rules.anthropic_refusal,
)

OPENAI_CHAT = WireFormat(
    view=openai_chat_wire.request_view,
    frames=openai_chat_wire.frames,
    answer=openai_chat_wire.completion,
    validate=openai_chat_errors,
    error_body=openai_chat_wire.error_body,
    error_frame=openai_chat_wire.error_frame,
    malformed=openai_chat_wire.MALFORMED,
    id_prefix="call_mock_",
    msg_id=lambda: "chatcmpl-mock" + uuid.uuid4().hex[:16],
    too_long=lambda tokens, _max, window: context_rules.chat_refusal(tokens, window),
)

OPENAI_RESPONSES = WireFormat(
    view=openai_responses_wire.request_view,
    frames=openai_responses_wire.frames,
    answer=openai_responses_wire.response_object,
    validate=openai_responses_errors,
    error_body=openai_responses_wire.error_body,
    error_frame=openai_responses_wire.error_frame,
    malformed=openai_responses_wire.MALFORMED,
    id_prefix="call_mock_",
    msg_id=lambda: "resp_mock" + uuid.uuid4().hex[:16],
    too_long=lambda tokens, _max, window: context_rules.responses_refusal(tokens, window),
)


class MockProvider:
    def __init__(self, default: Scenario | None = None) -> None:
        self.default = default or Scenario.load("echo")
        self.scenarios: dict[str, Scenario] = {}
        self.requests: list[dict[str, Any]] = []
        self.prompt_cache = PromptCache()
        self.formats: dict[str, WireFormat] = {"/v1/messages": ANTHROPIC, "/v1/chat/completions": OPENAI_CHAT,
                                               "/v1/responses": OPENAI_RESPONSES}

    def scenario_for(self, body: dict[str, Any]) -> Scenario:
        return self.scenarios.get(str(body.get("model", "")), self.default)

    async def handle(self, request: Request) -> Response:
        fmt = self.formats[request.url.path]
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse(fmt.error_body("invalid_request_error", "The request body is not valid JSON."), 400)
        if not isinstance(body, dict):
            return JSONResponse(fmt.error_body("invalid_request_error", "The request body must be an object."), 400)
        self.requests.append({"path": request.url.path, "body": body})
        del self.requests[:-500]
        problem = fmt.validate(body)
        if problem:
            return JSONResponse(fmt.error_body("invalid_request_error", problem), 400)
        scenario = self.scenario_for(body)
        if "replay" in scenario.doc:
            return self._replay(scenario.doc)
        window = context_rules.window_of(str(body.get("model", "")), scenario.doc)
        counted = None
        if window is not None:
            counted = context_rules.request_tokens(body)
            max_tokens = body.get("max_tokens") or body.get("max_output_tokens") or 0
            refusal = fmt.too_long(counted, max_tokens if isinstance(max_tokens, int) else 0, window)
            if refusal is not None:
                return JSONResponse(refusal, 400)
        script = scenario.script(fmt.view(body, steering=scenario.steering), id_prefix=fmt.id_prefix)
        cached = self.prompt_cache.usage(body) if fmt is ANTHROPIC else None
        if cached is not None:  # the request asks for caching: input tokens as the cache splits them
            script.usage = {**cached, **script.usage}  # cache counts a scenario scripts win
        elif counted is not None:  # a windowed model reports what it counted, as a provider does
            script.usage = {**script.usage, "input_tokens": counted}
        fault = script.fault or {}
        if fault.get("kind") == "status":
            headers = {}
            if fault.get("retry_after") is not None:
                headers["retry-after"] = str(fault["retry_after"])
            etype = str(fault.get("error_type", "overloaded_error"))
            return JSONResponse(fmt.error_body(etype, str(fault.get("message", "Overloaded"))),
                                int(fault.get("status", 529)), headers=headers)
        if body.get("stream") is not True:
            return await self._answer(script, fmt, str(body.get("model", "mock")))
        frames = fmt.frames(script, msg_id=fmt.msg_id(), model=str(body.get("model", "mock")),
                            truncate=fault.get("kind") == "truncate")
        return StreamingResponse(self._serve(frames, script, fmt), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    async def _answer(self, script: StepScript, fmt: WireFormat, model: str) -> Response:
        """A non-streaming answer. Faults: ``error_event`` becomes an error status (529 for
        ``overloaded_error``, else 500, or the fault's ``status``) with the API's error body;
        ``drop`` cuts the connection after ``after_bytes`` of the JSON; ``malformed`` and
        ``truncate`` send the first half of it; ``slow`` waits ``delay_ms`` once."""
        fault = script.fault or {}
        kind = fault.get("kind")
        if kind == "error_event":
            etype = str(fault.get("error_type", "overloaded_error"))
            status = int(fault.get("status", 529 if etype == "overloaded_error" else 500))
            return JSONResponse(fmt.error_body(etype, str(fault.get("message", "Overloaded"))), status)
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        data = json.dumps(fmt.answer(script, msg_id=fmt.msg_id(), model=model), separators=(",", ":"),
                          ensure_ascii=False).encode()
        if kind == "drop":
            cut = data[: int(fault.get("after_bytes", 200))]

            async def dropped() -> AsyncIterator[bytes]:
                yield cut
                raise SimulatedFault("mock fault: connection dropped")

            return StreamingResponse(dropped(), media_type="application/json")
        if kind in ("malformed", "truncate"):
            data = data[: len(data) // 2]
        return Response(data, media_type="application/json")

    async def _serve(self, frames: list[bytes], script: StepScript, fmt: WireFormat) -> AsyncIterator[bytes]:
        fault = script.fault or {}
        kind = fault.get("kind")
        after_events = int(fault.get("after_events", 3))
        after_bytes = int(fault.get("after_bytes", 200))
        sent = 0
        gate = script.gate
        for i, frame in enumerate(frames):
            if gate and i == int(gate.get("after_events", 1)):
                await wait_at_gate(gate)
            if kind == "error_event" and i == after_events:
                yield fmt.error_frame(str(fault.get("error_type", "overloaded_error")),
                                      str(fault.get("message", "Overloaded")))
                return
            if kind == "malformed" and i == after_events:
                yield fmt.malformed
                return
            if kind == "drop" and sent + len(frame) > after_bytes:
                yield frame[: max(0, after_bytes - sent)]
                raise SimulatedFault("mock fault: connection dropped")
            if script.delay_s:
                await asyncio.sleep(script.delay_s)
            sent += len(frame)
            if SENT_AT in frame:
                frame = frame.replace(SENT_AT, b"%.6f" % time.time())
            yield frame

    def _replay(self, doc: dict[str, Any]) -> Response:
        data = Path(doc["replay"]).read_bytes()
        rng = random.Random(doc.get("seed", 0))
        max_piece = int(doc.get("max_piece", 64))

        async def pieces() -> AsyncIterator[bytes]:
            i = 0
            while i < len(data):
                n = rng.randint(1, max_piece)
                yield data[i:i + n]
                i += n

        return StreamingResponse(pieces(), media_type="text/event-stream")

    async def register(self, request: Request) -> Response:
        doc = await request.json()
        for name, spec in doc.items():
            self.scenarios[name] = Scenario({"name": name, **spec})
        return JSONResponse({"registered": sorted(doc)})

    async def list_requests(self, request: Request) -> Response:
        return JSONResponse(self.requests)

    async def reset(self, request: Request) -> Response:
        self.scenarios.clear()
        self.requests.clear()
        self.prompt_cache = PromptCache()
        return JSONResponse({"ok": True})

    def app(self) -> Starlette:
        routes = [Route(path, self.handle, methods=["POST"]) for path in self.formats]
        routes += [
            Route("/_mock/scenarios", self.register, methods=["POST"]),
            Route("/_mock/requests", self.list_requests, methods=["GET"]),
            Route("/_mock/reset", self.reset, methods=["POST"]),
            Route("/health", lambda r: JSONResponse({"ok": True}), methods=["GET"]),
        ]
        return Starlette(routes=routes)


def build_app(scenario_path: str | None = None) -> Starlette:
    return MockProvider(Scenario.load(scenario_path) if scenario_path else None).app()
