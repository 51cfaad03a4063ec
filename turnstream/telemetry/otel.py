"""``Telemetry``: the spans and metrics of turns, on the OpenTelemetry API.

The runner holds one (``RunConfig.telemetry``) only when telemetry is on; it then wraps each
drive of a turn in ``invoke_agent``, each provider stream in ``chat``, and the executor each
tool call in ``execute_tool``. Spans become current where their children start in the same
task (an ``asyncio`` task copies the context it was created in, so parallel tool calls and a
turn started by an HTTP request find their parents), except ``chat``, which wraps an async
generator and is only ever a parent of nothing.

``client_span`` is the hook for calls to other services (an MCP server): a client span, and
the headers that carry its trace context to the service.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..blocks import Usage
from ..providers.base import ModelRequest, Provider, ProviderEvent, StepEnded
from .content import OutputCollector, input_messages

if TYPE_CHECKING:
    from ..blocks import ToolUseBlock, Turn
    from ..tools.tool import Tool

CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
PROVIDER_NAMES = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai"}
"""turnstream's provider prefixes as ``gen_ai.provider.name`` values (others pass as they are)."""
DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


def provider_name(provider: Provider) -> str:
    return PROVIDER_NAMES.get(provider.name, provider.name)


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: its class name (``cancelled`` for a cancellation)."""
    return "cancelled" if isinstance(exc, asyncio.CancelledError | GeneratorExit) else type(exc).__name__


def input_tokens(usage: Usage, provider: str) -> int:
    """Input tokens with the cached ones included, as the conventions count them (Anthropic
    reports cache reads and writes apart from ``input_tokens``; OpenAI includes them)."""
    if provider == "anthropic":
        return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    return usage.input_tokens


def _failed(span: Span, kind: str, description: str | None = None) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, description))


class ToolRun:
    """The span of one tool call, told how the call ended (``done``)."""

    def __init__(self, span: Span, capture: bool) -> None:
        self.span = span
        self.capture = capture

    def done(self, content: str, is_error: bool, kind: str | None) -> None:
        if self.capture:
            self.span.set_attribute("gen_ai.tool.call.result", content)
        if is_error:
            _failed(self.span, kind or "tool_error")


class AgentRun:
    """The ``invoke_agent`` span of one drive of a turn, told the turn it left (``done``)."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def done(self, turn: Turn | None) -> None:
        if turn is None:
            return
        self.span.set_attributes({
            "gen_ai.conversation.id": turn.session_id,
            "gen_ai.usage.input_tokens": turn.usage.input_tokens,
            "gen_ai.usage.output_tokens": turn.usage.output_tokens,
            "turnstream.turn.status": turn.status,
            "turnstream.turn.steps": turn.steps,
        })
        if turn.status == "failed":
            _failed(self.span, "turn_failed", turn.error)


class Telemetry:
    """Spans and metrics on ``tracer_provider`` and ``meter_provider`` (the global ones when
    None). ``capture_content`` records messages, tool arguments and results (default: the
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` variable)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None, *, capture_content: bool | None = None) -> None:
        self.tracer = trace.get_tracer("turnstream", tracer_provider=tracer_provider)
        meter = metrics.get_meter("turnstream", meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk", unit="s",
            description="Time to receive the first chunk of a streaming response",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"
        self.capture_content = capture_content

    @contextmanager
    def invoke_agent(self, turn_id: str, provider: Provider) -> Iterator[AgentRun]:
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": provider_name(provider),
            "gen_ai.request.model": provider.model, "turnstream.turn.id": turn_id}
        with self.tracer.start_as_current_span("invoke_agent", kind=SpanKind.INTERNAL, attributes=attrs,
                                               record_exception=False, set_status_on_exception=False) as span:
            try:
                yield AgentRun(span)
            except BaseException as exc:
                _failed(span, error_type(exc))
                raise

    async def chat(self, stream: AsyncIterator[ProviderEvent], request: ModelRequest,
                   provider: Provider) -> AsyncGenerator[ProviderEvent, None]:
        """``stream`` (one step's provider events, retries included) inside a ``chat`` span."""
        name = provider_name(provider)
        common: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": name,
                                             "gen_ai.request.model": request.model}
        attrs: dict[str, AttributeValue] = {**common, "gen_ai.request.max_tokens": request.max_tokens}
        collector = None
        if self.capture_content:
            attrs["gen_ai.input.messages"] = orjson.dumps(input_messages(request.messages)).decode()
            if request.system:
                attrs["gen_ai.system_instructions"] = orjson.dumps([{"type": "text",
                                                                     "content": request.system}]).decode()
            collector = OutputCollector()
        span = self.tracer.start_span(f"chat {request.model}", kind=SpanKind.CLIENT, attributes=attrs)
        start = time.perf_counter()
        first: float | None = None
        ended: StepEnded | None = None
        failure: str | None = None
        try:
            async for ev in stream:
                if first is None:
                    first = time.perf_counter() - start
                if type(ev) is StepEnded:
                    ended = ev
                if collector is not None:
                    collector.feed(ev)
                yield ev
        except BaseException as exc:
            if not (isinstance(exc, GeneratorExit) and ended is not None):  # closed after its end: fine
                failure = error_type(exc)
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
            metric_attrs = dict(common)
            if first is not None:
                span.set_attribute("gen_ai.response.time_to_first_chunk", first)
                self.first_chunk.record(first, common)
            if ended is not None:
                u = ended.usage
                inputs = input_tokens(u, name)
                span.set_attributes({
                    "gen_ai.response.finish_reasons": [ended.raw_stop_reason or ended.stop_reason],
                    "gen_ai.usage.input_tokens": inputs, "gen_ai.usage.output_tokens": u.output_tokens,
                    "gen_ai.usage.cache_read.input_tokens": u.cache_read_input_tokens,
                    "gen_ai.usage.cache_creation.input_tokens": u.cache_creation_input_tokens})
                if not u.unknown:
                    self.tokens.record(inputs, {**common, "gen_ai.token.type": "input"})
                    self.tokens.record(u.output_tokens, {**common, "gen_ai.token.type": "output"})
                if collector is not None:
                    span.set_attribute("gen_ai.output.messages",
                                       orjson.dumps(collector.messages(ended.stop_reason)).decode())
            if failure is not None:
                _failed(span, failure)
                metric_attrs["error.type"] = failure
            self.duration.record(time.perf_counter() - start, metric_attrs)
            span.end()

    @contextmanager
    def execute_tool(self, call: ToolUseBlock, tool: Tool) -> Iterator[ToolRun]:
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.tool_use_id, "gen_ai.tool.type": "function"}
        if tool.description:
            attrs["gen_ai.tool.description"] = tool.description
        if self.capture_content:
            attrs["gen_ai.tool.call.arguments"] = orjson.dumps(call.input).decode()
        with self.tracer.start_as_current_span(f"execute_tool {call.name}", kind=SpanKind.INTERNAL,
                                               attributes=attrs, record_exception=False,
                                               set_status_on_exception=False) as span:
            try:
                yield ToolRun(span, self.capture_content)
            except BaseException as exc:
                _failed(span, error_type(exc))
                raise

    @contextmanager
    def client_span(self, name: str,
                    attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[dict[str, str]]:
        """A client span around a call to another service, current while it runs; yields the
        headers (``traceparent``, ``tracestate``) that carry its context to that service.

        For an MCP tool call: ``with telemetry.client_span("tools/call get_weather",
        {"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_weather"}) as headers:``,
        sending ``headers`` with a streamable-HTTP request (or in the request's ``_meta``
        over stdio). An exception leaving the block marks the span failed (``error.type``)."""
        with self.tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=dict(attributes or {}),
                                               record_exception=False, set_status_on_exception=False) as span:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            try:
                yield headers
            except BaseException as exc:
                _failed(span, error_type(exc))
                raise

    def server_span_context(self, headers: Mapping[str, str]) -> Any:
        """The trace context an incoming request carries (``traceparent``), for its server span."""
        return propagate.extract(dict(headers))


__all__ = ["AgentRun", "Telemetry", "ToolRun", "error_type", "input_tokens", "provider_name"]
