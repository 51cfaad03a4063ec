"""``scripted:<scenario>``: the scenario engine in-process, as a provider.

It plays the same scenarios as ``turnstream mock-provider`` without HTTP, yielding the
neutral events an adapter would, fragment by fragment (with the scenario's delays), so the
loop, store, server and UIs run their real streaming path. Faults map to the errors an
HTTP adapter would raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from ..blocks import StopReason, ToolResultBlock, Usage
from ..errors import ProviderStatusError, ProviderStreamError, StreamBrokenError
from ..scenarios.engine import RequestView, Scenario, fragments, wait_at_gate
from .base import BlockClosed, BlockOpened, Delta, ModelRequest, ProviderEvent, StepEnded

RETRYABLE_TYPES = {"overloaded_error", "api_error", "rate_limit_error"}


def request_view(req: ModelRequest) -> RequestView:
    user_texts, rounds, last_input = 0, 0, ""
    results: list[str] = []
    for m in req.messages:
        if m.role == "user":
            texts = [b for b in m.blocks if isinstance(b, str)]
            results.extend(b.content for b in m.blocks if isinstance(b, ToolResultBlock))
            if texts:
                user_texts += 1
                rounds, results, last_input = 0, [], "".join(texts)
        else:
            rounds += 1
    return RequestView(user_texts, rounds, results, last_input, req.max_tokens, [t.name for t in req.tools])


_STOP_REASONS: dict[str, StopReason] = {s: s for s in ("end_turn", "tool_use", "max_tokens", "stop_sequence",
                                                      "refusal", "pause_turn")}
"""A scenario's stop reason as the loop knows it; any other (a provider-specific one) ends the turn."""


class ScriptedProvider:
    name = "scripted"

    def __init__(self, scenario: str | Scenario) -> None:
        self.scenario = scenario if isinstance(scenario, Scenario) else Scenario.load(scenario)
        self.model = self.scenario.name

    @property
    def origin(self) -> str:
        return f"{self.name}:{self.model}"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        script = self.scenario.script(request_view(request), id_prefix="toolu_scripted_")
        fault = script.fault or {}
        kind = fault.get("kind")
        if kind == "status":
            status = int(fault.get("status", 529))
            raise ProviderStatusError(str(fault.get("message", "Overloaded")), status=status,
                                      error_type=fault.get("error_type", "overloaded_error"),
                                      retryable=status in (408, 409, 429) or status >= 500,
                                      retry_after=fault.get("retry_after"))
        fail_after = int(fault.get("after_events", 3)) if kind in ("error_event", "malformed", "drop") else -1
        count = 0
        delay = script.delay_s
        gate = script.gate
        gate_at = int(gate.get("after_events", 1)) + 1 if gate else -1  # the tick before the event after them

        async def tick() -> None:
            nonlocal count
            count += 1
            if gate and count == gate_at:
                await wait_at_gate(gate)
            if count == fail_after:
                if kind == "error_event":
                    etype = str(fault.get("error_type", "overloaded_error"))
                    raise ProviderStreamError(str(fault.get("message", "Overloaded")), status=200, error_type=etype,
                                              retryable=etype in RETRYABLE_TYPES)
                raise StreamBrokenError(f"the stream broke ({kind})", retryable=True)
            if delay:
                await asyncio.sleep(delay)

        size = script.fragment_size
        for i, b in enumerate(script.blocks):
            await tick()
            if b.type == "tool_use":
                yield BlockOpened(i, "tool_use", tool_use_id=b.id, name=b.name)
                for f in fragments(b.arguments, size):
                    await tick()
                    yield Delta(i, "input_json", f)
                if not b.complete:
                    continue
            elif b.type == "redacted_thinking":
                yield BlockOpened(i, "redacted_thinking", data={"data": b.data})
            else:
                thinking = b.type == "thinking"
                yield BlockOpened(i, "thinking" if thinking else "text")
                for f in fragments(b.text, size):
                    await tick()
                    yield Delta(i, "thinking" if thinking else "text", f)
                if b.type == "thinking":
                    yield Delta(i, "signature", b.signature)
            yield BlockClosed(i)
        if kind == "truncate":
            raise StreamBrokenError("the stream ended without its final event", retryable=True)
        u = script.usage
        usage = Usage(input_tokens=u.get("input_tokens", 0), output_tokens=u.get("output_tokens", 0),
                      cache_read_input_tokens=u.get("cache_read_input_tokens", 0),
                      cache_creation_input_tokens=u.get("cache_creation_input_tokens", 0))
        yield StepEnded(_STOP_REASONS.get(script.stop_reason, "end_turn"), usage, script.stop_reason)

    async def aclose(self) -> None:
        return None
