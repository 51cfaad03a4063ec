"""An MCP tool call in a trace (telemetry on): the attributes of its client span, named as the
MCP semantic conventions say, and the W3C headers that carry the span's context over
streamable HTTP beside the request's ``_meta`` (``trace_headers``, an httpx event hook of the
toolset's connection).
"""

from __future__ import annotations

import httpx2
import orjson


def span_attributes(server: str, url: str | None, remote: str) -> dict[str, str | int]:
    """The client span's attributes for a call of the tool ``remote`` on the MCP server named
    ``server``, reached at ``url`` (None: a command over its stdin and stdout)."""
    attrs: dict[str, str | int] = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                                   "gen_ai.tool.name": remote, "turnstream.mcp.server": server}
    if url is None:
        attrs["network.transport"] = "pipe"
        return attrs
    parsed = httpx2.URL(url)
    attrs.update({"network.transport": "tcp", "server.address": parsed.host})
    if parsed.port is not None:
        attrs["server.port"] = parsed.port
    return attrs


async def trace_headers(request: httpx2.Request) -> None:
    """A request whose ``_meta`` carries a trace context (``traceparent``, ``tracestate``: a call
    made in a span) carries it as the W3C headers too, for servers and proxies that read only
    those. The requests are sent from the connection's own task, where the caller's span is not
    current, so the body, written in the caller's task, is where the context is found."""
    if request.method != "POST" or b'"traceparent"' not in request.content:
        return
    try:
        message = orjson.loads(request.content)
    except orjson.JSONDecodeError:
        return
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        for key in ("traceparent", "tracestate"):
            if isinstance(meta.get(key), str):
                request.headers[key] = meta[key]


__all__ = ["span_attributes", "trace_headers"]
