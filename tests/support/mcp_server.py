"""A real MCP server written with the ``mcp`` SDK, for the tests: ``python -m
tests.support.mcp_server stdio`` or ``… http PORT`` (streamable HTTP on 127.0.0.1:PORT/mcp),
which speak the protocol the client opens with (2026-07-28, or the handshake of the older
versions); ``… stdio-2025`` speaks only the older versions (the ``initialize`` handshake).

Its tools: ``add``; ``hang`` (sleeps until cancelled, and says so on stderr); ``crash`` (the
process exits mid-call); ``fail`` (an ``isError`` result); ``media`` (text, a PNG, an embedded
PDF, a resource link and a WAV clip); ``greet`` (asks the user's name: an elicitation,
2026-07-28 style); ``ask`` (asks the user's name mid-call, the pre-2026 way, and says what it
got on stderr); ``signup`` (asks for a form of a string, an integer, a boolean and a choice);
``paint`` (asks for a multi-select of colours, at least one, and a size from an ``enum``);
``count`` (reports its progress, ``notifications/progress``, for each step it counts);
``trace`` (the ``traceparent`` the request carried, as an HTTP header and in ``_meta``);
``grow`` (adds the tool ``extra`` and announces the change); ``pid`` (this process's id, to
tell a restarted server); ``haiku`` (asks the client's model for a haiku mid-call: sampling,
``sampling/createMessage``, and says on stderr what it got).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import warnings
from typing import Annotated, Literal

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel, Field

from tests.support.media import PDF, PNG

server = MCPServer("test-tools")
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 28


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
async def hang() -> str:
    """Never finishes on its own."""
    print("hang: started", file=sys.stderr, flush=True)
    try:
        await anyio.sleep_forever()
    finally:
        print("hang: cancelled", file=sys.stderr, flush=True)
    return "unreachable"


@server.tool()
def crash() -> str:
    """The server process dies during the call."""
    os._exit(3)


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the disk is on fire")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@server.tool()
def media() -> list[TextContent | ImageContent | EmbeddedResource | ResourceLink | AudioContent]:
    """A picture, a document, a link and a sound."""
    return [TextContent(type="text", text="here you are"),
            ImageContent(type="image", data=b64(PNG), mime_type="image/png"),
            EmbeddedResource(type="resource", resource=BlobResourceContents(
                uri="file:///srv/summary.pdf", mime_type="application/pdf", blob=b64(PDF))),
            ResourceLink(type="resource_link", name="report", uri="file:///srv/report.pdf",
                         mime_type="application/pdf", description="the full report"),
            AudioContent(type="audio", data=b64(WAV), mime_type="audio/wav")]


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greets the user by name (asks for it)."""
    return f"Hello, {who.name}!"


@server.tool()
async def ask(ctx: Context) -> str:
    """Greets the user by name, asking for it mid-call (the request a pre-2026 server sends)."""
    answer = await ctx.elicit("What is your name?", Name)
    print(f"ask: {answer.action}", file=sys.stderr, flush=True)
    return f"Hello, {answer.data.name}!" if answer.action == "accept" else f"No name ({answer.action})."


class Signup(BaseModel):
    name: str
    age: int
    newsletter: bool
    plan: Literal["free", "pro"]


def ask_signup() -> Elicit[Signup]:
    return Elicit("Sign up for the course", Signup)


@server.tool()
def signup(form: Annotated[Signup, Resolve(ask_signup)]) -> str:
    """Signs the user up (asks for their details)."""
    news = "with" if form.newsletter else "without"
    return f"{form.name} ({form.age}) is on the {form.plan} plan, {news} the newsletter"


class Palette(BaseModel):
    colors: Annotated[list[Literal["red", "green", "blue"]], Field(min_length=1)]
    size: Literal["S", "M", "L"]


def ask_palette() -> Elicit[Palette]:
    return Elicit("Which colours, and what size?", Palette)


@server.tool()
def paint(palette: Annotated[Palette, Resolve(ask_palette)]) -> str:
    """Paints in the user's colours (asks for them: a multi-select)."""
    return f"{', '.join(palette.colors)} in {palette.size}"


@server.tool()
async def count(ctx: Context, to: int = 3) -> str:
    """Counts to ``to``, reporting each step as progress."""
    for i in range(1, to + 1):
        await ctx.report_progress(i, to, f"counted {i}")
    return f"counted to {to}"


@server.tool()
def trace(ctx: Context) -> str:
    """The trace context this call carried: the HTTP header (streamable HTTP) and ``_meta``."""
    headers = ctx.headers or {}
    meta = ctx.request_context.meta or {}
    return json.dumps({"header": headers.get("traceparent"), "meta": dict(meta).get("traceparent")})


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `extra`."""

    def extra() -> str:
        """A tool that appeared later."""
        return "extra!"

    server.add_tool(extra)
    await ctx.notify_tools_changed()
    return "grown"


@server.tool()
async def haiku(ctx: Context, topic: str = "the sea") -> str:
    """Asks the client's model for a haiku about ``topic`` (a sampling request mid-call)."""
    ask = SamplingMessage(role="user", content=TextContent(type="text", text=f"Write a haiku about {topic}."))
    try:
        with warnings.catch_warnings():  # sampling is deprecated as of 2026-07-28; this server tests it
            warnings.simplefilter("ignore")
            result = await ctx.session.create_message([ask], max_tokens=60, system_prompt="You are a poet.")
    except MCPError as exc:
        print(f"haiku: refused ({exc.error.code}: {exc.error.message})", file=sys.stderr, flush=True)
        return f"No haiku: {exc.error.message}"
    text = result.content.text if isinstance(result.content, TextContent) else str(result.content)
    print(f"haiku: {result.model} {result.stop_reason}", file=sys.stderr, flush=True)
    return f"{result.model} wrote: {text}"


@server.tool()
def pid() -> str:
    """This server process's id."""
    return str(os.getpid())


async def serve_handshake_only() -> None:
    """Over stdio, the ``initialize`` handshake only (protocol versions before 2026-07-28): a
    ``server/discover`` probe is refused, and the client falls back to the handshake."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    elif sys.argv[1] == "stdio-2025":
        anyio.run(serve_handshake_only)
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
