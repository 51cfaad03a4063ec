"""OpenTelemetry spans and metrics of a real turn (Anthropic's wire, the mock provider over
HTTP), read from the SDK's in-memory exporter and metric reader: a 3-step turn whose first
step runs two tools at once and whose second step's tool fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from turnstream import Agent, ToolUseBlock, tool
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.telemetry.otel import Telemetry

Make = Callable[[dict[str, Any]], AnthropicProvider]

STEPS = {"fragment_size": 3, "steps": [
    {"blocks": [{"type": "text", "text": "Looking both up."},
                {"type": "tool_use", "name": "lookup", "input": {"key": "a"}},
                {"type": "tool_use", "name": "lookup", "input": {"key": "b"}}],
     "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 40,
               "cache_creation_input_tokens": 7}},
    {"blocks": [{"type": "tool_use", "name": "explode", "input": {"why": "testing"}}],
     "usage": {"input_tokens": 150, "output_tokens": 5}},
    {"blocks": [{"type": "text", "text": "Done: {{results[0]}}"}], "usage": {"input_tokens": 170, "output_tokens": 9}},
]}


def telemetry(capture: bool) -> tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return Telemetry(tracer_provider, MeterProvider(metric_readers=[reader]), capture_content=capture), spans, reader


def tools() -> list[Any]:
    started: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        started[key].set()
        other = "b" if key == "a" else "a"
        await asyncio.wait_for(started[other].wait(), 10)  # returns only if both run at once
        return f"value of {key}"

    @tool
    def explode(why: str) -> str:
        """Fail."""
        raise RuntimeError(f"exploded: {why}")

    return [lookup, explode]


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


async def test_a_three_step_turn_with_parallel_tools_and_an_error(provider_for: Make) -> None:
    tel, exporter, reader = telemetry(capture=False)
    provider = provider_for(STEPS)
    turn = await Agent(provider, tools=tools(), telemetry=tel).run("look a and b up")
    assert turn.status == "complete" and turn.steps == 3
    spans = exporter.get_finished_spans()
    [agent] = by_name(spans, "invoke_agent")
    chats = by_name(spans, "chat ")
    runs = by_name(spans, "execute_tool ")
    assert len(spans) == 1 + 3 + 3
    assert agent.parent is None and agent.kind == SpanKind.INTERNAL
    assert agent.attributes is not None
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.conversation.id"] == turn.session_id
    assert agent.attributes["turnstream.turn.id"] == turn.id
    assert agent.attributes["gen_ai.usage.output_tokens"] == 34
    for child in (*chats, *runs):  # one trace, every span a child of the turn's
        assert child.context is not None and agent.context is not None
        assert child.context.trace_id == agent.context.trace_id
        assert child.parent is not None and child.parent.span_id == agent.context.span_id

    assert [c.name for c in chats] == [f"chat {provider.model}"] * 3
    first, second, third = (dict(c.attributes or {}) for c in chats)
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == provider.model and chats[0].kind == SpanKind.CLIENT
    assert first["gen_ai.usage.input_tokens"] == 100 + 40 + 7  # cache reads and writes included
    assert (first["gen_ai.usage.cache_read.input_tokens"], first["gen_ai.usage.cache_creation.input_tokens"]) == (40, 7)
    assert [a["gen_ai.usage.output_tokens"] for a in (first, second, third)] == [20, 5, 9]
    assert [a["gen_ai.response.finish_reasons"] for a in (first, second, third)] == [
        ("tool_use",), ("tool_use",), ("end_turn",)]
    for c in chats:
        ttfc = (c.attributes or {})["gen_ai.response.time_to_first_chunk"]
        assert isinstance(ttfc, float) and 0 < ttfc * 1e9 < (c.end_time or 0) - (c.start_time or 0)
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output")) for k in first)  # content is opt-in

    calls = [b for b in turn.blocks if isinstance(b, ToolUseBlock)]
    assert [(r.name, (r.attributes or {})["gen_ai.tool.call.id"]) for r in runs] == [
        (f"execute_tool {c.name}", c.tool_use_id) for c in calls]
    a, b, boom = runs
    assert (a.attributes or {})["gen_ai.tool.name"] == "lookup" and a.status.status_code == StatusCode.UNSET
    # the two lookups overlapped in time; the failing call came after both, in the next step
    assert (a.start_time or 0) < (b.end_time or 0) and (b.start_time or 0) < (a.end_time or 0)
    assert (chats[0].end_time or 0) <= min(a.start_time or 0, b.start_time or 0)
    assert (boom.start_time or 0) >= (chats[1].end_time or 0)
    assert (boom.attributes or {})["error.type"] == "RuntimeError"
    assert boom.status.status_code == StatusCode.ERROR
    assert "gen_ai.tool.call.arguments" not in (boom.attributes or {})

    metrics = {m.name: m for rm in reader.get_metrics_data().resource_metrics  # type: ignore[union-attr]
               for sm in rm.scope_metrics for m in sm.metrics}
    [duration] = metrics["gen_ai.client.operation.duration"].data.data_points  # type: ignore[attr-defined]
    assert duration.count == 3 and dict(duration.attributes)["gen_ai.operation.name"] == "chat"
    assert metrics["gen_ai.client.operation.duration"].unit == "s"
    tokens = {dict(p.attributes)["gen_ai.token.type"]: p
              for p in metrics["gen_ai.client.token.usage"].data.data_points}  # type: ignore[attr-defined]
    assert (tokens["input"].sum, tokens["input"].count) == (147 + 150 + 170, 3)
    assert (tokens["output"].sum, tokens["output"].count) == (34, 3)


async def test_message_contents_only_when_captured(provider_for: Make) -> None:
    tel, exporter, _ = telemetry(capture=True)
    turn = await Agent(provider_for(STEPS), tools=tools(), system="Be brief.", telemetry=tel).run("look a and b up")
    assert turn.status == "complete"
    spans = exporter.get_finished_spans()
    chats = by_name(spans, "chat ")
    first = dict(chats[0].attributes or {})
    assert json.loads(str(first["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "look a and b up"}]}]
    assert json.loads(str(first["gen_ai.system_instructions"])) == [{"type": "text", "content": "Be brief."}]
    [out] = json.loads(str(first["gen_ai.output.messages"]))
    assert out["role"] == "assistant" and out["finish_reason"] == "tool_use"
    assert out["parts"][0] == {"type": "text", "content": "Looking both up."}
    assert [(p["name"], p["arguments"]) for p in out["parts"][1:]] == [
        ("lookup", {"key": "a"}), ("lookup", {"key": "b"})]
    later = json.loads(str((chats[1].attributes or {})["gen_ai.input.messages"]))
    assert later[-1]["role"] == "tool" and [p["response"] for p in later[-1]["parts"]] == ["value of a", "value of b"]
    boom = by_name(spans, "execute_tool explode")[0]
    assert json.loads(str((boom.attributes or {})["gen_ai.tool.call.arguments"])) == {"why": "testing"}
    assert (boom.attributes or {})["gen_ai.tool.call.result"] == "RuntimeError: exploded: testing"
