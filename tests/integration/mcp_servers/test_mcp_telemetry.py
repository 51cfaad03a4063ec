"""MCP client spans: each MCP tool call is a ``tools/call`` CLIENT span under its
``execute_tool`` span (the SDK's in-memory exporter), and the test MCP server receives that
span's trace context: as the ``traceparent`` header over streamable HTTP and in ``_meta``
over both transports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind

from turnstream import Agent, ToolResultBlock, ToolUseBlock
from turnstream.mcp import MCPToolset
from turnstream.mcp.toolset import CONTEXT_KEY
from turnstream.telemetry.otel import Telemetry
from turnstream.tools.tool import ToolContext

ROOT = Path(__file__).resolve().parents[3]


def traceparent(ctx: SpanContext) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


async def test_an_mcp_call_is_a_client_span_whose_context_reaches_the_server(tmp_path: Path, http_url: str) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(tracer_provider, MeterProvider())
    script = tmp_path / "trace.json"
    script.write_text(json.dumps({"name": "trace", "steps": [
        {"blocks": [{"type": "tool_use", "name": "h__trace", "input": {}},
                    {"type": "tool_use", "name": "s__trace", "input": {}}]},
        {"blocks": [{"type": "text", "text": "traced"}]}]}))
    with (tmp_path / "stderr.log").open("w") as stderr:
        stdio = MCPToolset.stdio("s", sys.executable, ["-m", "tests.support.mcp_server", "stdio"], cwd=str(ROOT),
                                 timeout=20, stderr=stderr)
        http = MCPToolset.http("h", http_url, timeout=20)
        async with Agent(f"scripted:{script}", tools=[stdio, http], telemetry=telemetry) as agent:
            turn = await agent.run("trace both")
    assert turn.status == "complete", turn
    names = {b.tool_use_id: b.name for b in turn.blocks if isinstance(b, ToolUseBlock)}
    got = {names[b.tool_use_id]: json.loads(b.content) for b in turn.blocks if isinstance(b, ToolResultBlock)}

    spans = exporter.get_finished_spans()
    for tool, server, transport in (("h__trace", "h", "tcp"), ("s__trace", "s", "pipe")):
        [run] = [s for s in spans if s.name == f"execute_tool {tool}"]
        [client] = [s for s in spans if s.name == "tools/call trace" and s.attributes is not None
                    and s.attributes["turnstream.mcp.server"] == server]
        assert client.kind == SpanKind.CLIENT
        assert client.parent is not None and client.parent.span_id == run.context.span_id
        assert client.context.trace_id == run.context.trace_id
        assert client.attributes is not None
        assert client.attributes["mcp.method.name"] == "tools/call"
        assert client.attributes["gen_ai.tool.name"] == "trace"
        assert client.attributes["gen_ai.operation.name"] == "execute_tool"
        assert client.attributes["network.transport"] == transport
        # the server saw the client span's context: in _meta on both transports, and as the
        # W3C header over HTTP (stdio has no headers)
        assert got[tool]["meta"] == traceparent(client.context)
        assert got[tool]["header"] == (traceparent(client.context) if server == "h" else None)
    [http_span] = [s for s in spans if s.attributes and s.attributes.get("turnstream.mcp.server") == "h"]
    assert http_span.attributes is not None
    assert http_span.attributes["server.address"] == "127.0.0.1"


async def test_without_telemetry_no_trace_context_is_sent(http_url: str) -> None:
    http = MCPToolset.http("h", http_url, timeout=20)
    try:
        tool = {t.name: t for t in await http.list_tools()}["h__trace"]
        assert tool.fn is not None
        got = json.loads(await tool.fn(**{CONTEXT_KEY: ToolContext("s", "t", "c")}))
    finally:
        await http.aclose()
    assert got == {"header": None, "meta": None}
