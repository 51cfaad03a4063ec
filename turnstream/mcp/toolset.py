"""``MCPToolset``: the tools of one MCP server, as turnstream tools.

    files = MCPToolset.stdio("files", "python", ["files_server.py"], timeout=10)
    search = MCPToolset.http("search", "https://example.com/mcp", headers={"Authorization": "Bearer …"})
    agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather, files, search])

The connection opens on first use and is held by one background task (the SDK's client is
a context manager that must be entered and left in one task); calls from any task go
through it. A server that dies is noticed at once (its in-flight calls end with an error
result) and started again on the next use. A command that does not start is started again
only after ``RETRY_DELAYS``, and after ``MAX_FAILURES`` in a row not until ``retry()`` (an
HTTP server, which costs no process, is tried at each use); its state goes to ``on_status``
when it changes (``tools/server_status.py``). The tool list is cached and listed again after
the server says it changed (``tools/list_changed``, or a ``subscriptions/listen`` event on
2026-07-28 connections).

Each call runs under the tool's timeout and the turn's cancel, like any tool: leaving the
``await`` cancels the MCP request. An ``isError`` result or a protocol error becomes an
``is_error`` result; images and PDFs in a result become its attachments (``content.py``). A
server that asks the user for input (an elicitation) pauses the turn (``InputNeeded``) and
the answer comes back through ``ToolContext.answer``. On 2026-07-28 connections the question
is an ``InputRequiredResult`` and the call is sent again with the answer and the server's
``request_state``, so nothing is held open while the user thinks; on older ones it is a
request in the middle of the call, which is held open in this process (``live.py``). A
server's request for the model (sampling, on those older connections) is answered by the
turn's own model as ``sampling`` says: ask the user first, allow, or deny (``sampling.py``).

Why one module of this size: the connection task, the call path and the tool-list cache share
one lifecycle (a server that dies ends all three at once, and the next use starts them again).
What holds no state of it is beside it: a call's trace context (``tracing.py``), a question
and its answer as MCP and as turnstream (``questions.py``).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp_types as mt
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..content import MediaPart
from ..errors import MCPServerError, MCPToolError, UsageError
from ..tools.executor import format_seconds
from ..tools.server_status import ServerStatus
from ..tools.tool import DEFAULT_TIMEOUT, Tool, ToolContext
from .config import ServerConfig
from .content import result_content
from .live import HOLD_LIMIT, CallResult, LiveCalls
from .names import server_name_problem, tool_name
from .questions import elicit_result, input_needed
from .sampling import SamplingMode
from .tracing import span_attributes, trace_headers

log = logging.getLogger("turnstream.mcp")

CONNECT_TIMEOUT = 30.0
RETRY_DELAYS = (2.0, 10.0)
"""Pauses before the second and later tries to start a server that did not start."""
MAX_FAILURES = 3
"""Failed starts in a row after which a server is not tried again until ``retry()``."""
CLOSE_TIMEOUT = 5.0
CONTEXT_KEY = "__turnstream_context__"
"""The keyword under which the executor hands an MCP tool its ``ToolContext``."""


class MCPToolset:
    """The tools of one MCP server: ``stdio(...)`` or ``http(...)``, or from a config entry."""

    def __init__(self, name: str, *, command: str | None = None, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, cwd: str | None = None, url: str | None = None,
                 headers: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 requires_approval: bool = False, tools: Collection[str] | None = None,
                 stderr: TextIO | None = None, sampling: SamplingMode = "ask") -> None:
        problem = server_name_problem(name)
        if problem is not None:
            raise UsageError(problem)
        if (command is None) == (url is None):
            raise UsageError(f"MCP server {name!r}: give either command (stdio) or url (streamable HTTP)")
        if timeout <= 0:
            raise UsageError(f"MCP server {name!r}: timeout must be positive")
        self.name = name
        self.command, self.args, self.env, self.cwd = command, list(args), dict(env or {}), cwd
        self.url, self.headers = url, dict(headers or {})
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.allowed = set(tools) if tools is not None else None
        self.stderr = stderr
        self._tools: list[Tool] | None = None
        self._stale = True
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._ending: set[asyncio.Task[None]] = set()
        """Connections let go of (their server stopped), until their tasks end."""
        self._live = LiveCalls(name, sampling)
        """Calls on pre-2026-07-28 connections, which may ask a question (or the model) mid-call."""
        self.on_status: Callable[[ServerStatus], None] | None = None
        """Told when the server's state changes: up, retrying, stopped."""
        self._failures = 0
        self._retry_at = 0.0
        self._error: str | None = None
        self._told: ServerStatus | None = None

    @classmethod
    def stdio(cls, name: str, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
              cwd: str | None = None, timeout: float = DEFAULT_TIMEOUT, requires_approval: bool = False,
              tools: Collection[str] | None = None, stderr: TextIO | None = None,
              sampling: SamplingMode = "ask") -> MCPToolset:
        """A server this process starts (``command args``) and talks to over its stdin and stdout."""
        return cls(name, command=command, args=args, env=env, cwd=cwd, timeout=timeout,
                   requires_approval=requires_approval, tools=tools, stderr=stderr, sampling=sampling)

    @classmethod
    def http(cls, name: str, url: str, *, headers: Mapping[str, str] | None = None,
             timeout: float = DEFAULT_TIMEOUT, requires_approval: bool = False,
             tools: Collection[str] | None = None, sampling: SamplingMode = "ask") -> MCPToolset:
        """A server reached over streamable HTTP at ``url``, sending ``headers`` with each request."""
        return cls(name, url=url, headers=headers, timeout=timeout, requires_approval=requires_approval,
                   tools=tools, sampling=sampling)

    @classmethod
    def from_config(cls, name: str, entry: ServerConfig, *, stderr: TextIO | None = None,
                    sampling: SamplingMode = "ask") -> MCPToolset:
        return cls(name, command=entry.command, args=entry.args, env=entry.env, cwd=entry.cwd, url=entry.url,
                   headers=entry.headers, timeout=entry.timeout, requires_approval=entry.requires_approval,
                   tools=entry.tools, stderr=stderr, sampling=sampling)

    def __repr__(self) -> str:  # no headers or env: they may hold secrets
        where = self.url if self.url is not None else self.command
        return f"MCPToolset({self.name!r}, {where!r})"

    # -- the toolset protocol ----------------------------------------------------------------

    async def list_tools(self) -> list[Tool]:
        if self._tools is not None and not self._stale:
            return self._tools
        if self._resting():
            return self._tools or []
        try:
            client = await self._connected()
            self._stale = False  # a change announced while listing marks it stale again
            listed: list[mt.Tool] = []
            cursor: str | None = None
            while True:
                with anyio.fail_after(self.timeout):
                    page = await client.list_tools(cursor=cursor)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            self._stale = True
            log.warning("MCP server %s: could not list its tools (%s: %s); using the %s", self.name,
                        type(exc).__name__, exc, "last list" if self._tools is not None else "empty list")
            return self._tools or []
        self._tools = self._wrap_all(listed)
        log.info("MCP server %s: %d tools", self.name, len(self._tools))
        return self._tools

    def known_tool_names(self) -> set[str]:
        return {t.name for t in self._tools or []}

    # -- whether it is up (tools/server_status.py) -------------------------------------------

    def status(self) -> ServerStatus | None:
        spawned = self.command is not None
        if spawned and self._failures >= MAX_FAILURES:
            return ServerStatus(self.name, "stopped", self._error, self._failures)
        if self._failures:
            wait = max(0.0, self._retry_at - time.monotonic()) if spawned else None
            return ServerStatus(self.name, "retrying", self._error, self._failures, wait)
        return ServerStatus(self.name, "up") if self._client is not None else None

    def retry(self) -> None:
        self._failures, self._retry_at = 0, 0.0

    def _resting(self) -> bool:
        """Whether a command that did not start is not to be started now."""
        return (self.command is not None and bool(self._failures)
                and (self._failures >= MAX_FAILURES or time.monotonic() < self._retry_at))

    def _started(self, ok: bool, error: str = "") -> None:
        if ok:
            self._failures, self._error = 0, None
        else:
            self._failures += 1
            self._error = error
            self._retry_at = time.monotonic() + RETRY_DELAYS[min(self._failures, len(RETRY_DELAYS)) - 1]
        status = self.status()
        if status is not None and (self._told is None or status.state != self._told.state):
            self._told = status
            if self.on_status is not None:
                self.on_status(status)

    def _drop(self, client: Client) -> None:
        """The connection of ``client`` broke: the next call connects again."""
        self._stale = True
        if self._client is not client or self._task is None:
            return
        if self._stop is not None:
            self._stop.set()
        task = self._task
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)
        self._client = self._task = self._stop = None

    async def aclose(self) -> None:
        self._live.close()
        for ending in list(self._ending):
            ending.cancel()
        task, stop = self._task, self._stop
        self._task = self._stop = None
        self._client = None
        if task is None or stop is None or task.done():
            return
        stop.set()
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def __aenter__(self) -> MCPToolset:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- tools -------------------------------------------------------------------------------

    def _wrap_all(self, listed: list[mt.Tool]) -> list[Tool]:
        tools: dict[str, Tool] = {}
        for t in listed:
            if self.allowed is not None and t.name not in self.allowed:
                continue
            name = tool_name(self.name, t.name)
            if name in tools:
                log.warning("MCP server %s: tool %r has the same name as another one (%s); left out",
                            self.name, t.name, name)
                continue
            tools[name] = self._wrap(name, t)
        return list(tools.values())

    def _wrap(self, name: str, remote: mt.Tool) -> Tool:
        async def call(**args: Any) -> str | list[str | MediaPart]:
            ctx = args.pop(CONTEXT_KEY)
            assert isinstance(ctx, ToolContext)
            return await self.call(remote.name, args, ctx)

        schema = dict(remote.input_schema) if remote.input_schema else {"type": "object", "properties": {}}
        schema.pop("title", None)
        description = remote.description or remote.title or f"The tool {remote.name} of the MCP server {self.name}."
        return Tool(name=name, description=description, input_schema=schema, fn=call, timeout=self.timeout,
                    requires_approval=self.requires_approval, is_async=True, context_param=CONTEXT_KEY)

    async def call(self, remote: str, args: dict[str, Any], ctx: ToolContext) -> str | list[str | MediaPart]:
        """Call the server's tool ``remote``: the result's text (and its images and PDFs, if
        any, after it), or ``MCPToolError`` / ``MCPServerError``, or ``InputNeeded`` when the
        server asks the user something."""
        state: dict[str, Any] = {}
        if ctx.answer is not None:
            state = ctx.answer.get("state") or {}
            if not isinstance(state, dict) or state.get("server") != self.name:
                raise MCPServerError("the answer given does not belong to this server's question")
        client: Client | None = None
        try:
            if "live" in state:
                assert ctx.answer is not None
                result = await self._answer_live(state, elicit_result(ctx.answer), ctx)
            else:
                client = await self._connected()
                result = await self._send(client, remote, args, state, ctx)
        except MCPError as exc:
            if exc.error.code == mt.CONNECTION_CLOSED:
                if client is not None:
                    self._drop(client)
                raise MCPServerError(f"the MCP server {self.name!r} stopped during the call; it is started "
                                     "again on the next call") from None
            if "request_state" in state:
                raise MCPServerError(
                    f"the MCP server {self.name!r} no longer takes the answer to its question ({exc}); it was "
                    "probably started again since it asked, and the call it asked from is lost. To go on, call "
                    "the tool again (the question is asked again)") from None
            raise MCPServerError(f"the MCP server {self.name!r} answered with an error: {exc}") from None
        if isinstance(result, mt.InputRequiredResult):
            raise input_needed(self.name, result)
        if not isinstance(result, mt.CallToolResult):
            raise MCPServerError(f"the MCP server {self.name!r} sent a result of a kind turnstream does not know")
        if result.is_error:
            text, _ = result_content(result, with_media=False)
            raise MCPToolError(text or "the tool reported an error")
        text, media = result_content(result)
        return [text, *media] if media else text

    async def _send(self, client: Client, remote: str, args: dict[str, Any], state: dict[str, Any],
                    ctx: ToolContext) -> CallResult:
        """Send the call: on a 2026-07-28 connection as a plain request (with the answer to
        its question, when it is sent again after one); on an older one in a task of its own,
        so that a question it asks mid-call can be held open (``live.py``)."""
        protocol = client.protocol_version
        if protocol in MODERN_PROTOCOL_VERSIONS:
            extra: dict[str, Any] = {}
            if ctx.answer is not None:
                if not isinstance(state.get("key"), str):
                    raise MCPServerError("the answer given does not belong to this server's question")
                extra = {"input_responses": {state["key"]: elicit_result(ctx.answer)},
                         "request_state": state.get("request_state")}
            return await self._mcp_call(client, remote, args, extra, ctx)
        call = self._live.start(self._mcp_call(client, remote, args, {}, ctx), ctx)
        return await self._live.follow(call, protocol)

    async def _answer_live(self, state: dict[str, Any], reply: mt.ElicitResult, ctx: ToolContext) -> CallResult:
        """Hand the answer to a question asked mid-call, and follow the call on (in ``ctx``'s run)."""
        call = self._live.answer(state.get("live"), reply, ctx)
        if call is None:
            raise MCPServerError(
                f"the MCP server {self.name!r} asked its question in the middle of the call (protocol "
                f"{state.get('protocol', 'before 2026-07-28')}), so the call was held open only in the process that "
                "ran it; that process restarted (or the question waited longer than "
                f"{format_seconds(HOLD_LIMIT)}), and the server's question could not be carried across the restart. "
                "To go on, call the tool again (the question is asked again)")
        return await self._live.follow(call, str(state.get("protocol")))

    async def _mcp_call(self, client: Client, remote: str, args: dict[str, Any], extra: dict[str, Any],
                        ctx: ToolContext) -> mt.CallToolResult | mt.InputRequiredResult:
        """The one place an MCP ``tools/call`` is sent. It asks for progress (a
        ``progressToken``) when someone listens to the call's (``ToolContext.progress``), and the
        server's ``notifications/progress`` go there. With telemetry on, inside a client span
        (named and described as the MCP semantic conventions say) whose trace context goes in
        the request's ``_meta`` (and, over HTTP, the ``traceparent`` header: ``tracing.py``)."""
        result: mt.CallToolResult | mt.InputRequiredResult
        if ctx.on_progress is not None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                ctx.progress(done, total, message)

            extra = {**extra, "progress_callback": progress}
        telemetry = ctx.telemetry
        if telemetry is None:
            result = await client.session.call_tool(remote, args, allow_input_required=True, **extra)
            return result
        with telemetry.client_span(f"tools/call {remote}", span_attributes(self.name, self.url, remote)) as carrier:
            meta = cast(mt.RequestParamsMeta, dict(carrier))
            result = await client.session.call_tool(remote, args, allow_input_required=True, meta=meta, **extra)
        return result

    # -- the connection ----------------------------------------------------------------------

    async def _connected(self) -> Client:
        """The live client, connecting (again) first when there is none."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None and self._task is not None and not self._task.done():
                return self._client
            if self._resting():
                status = self.status()
                assert status is not None
                raise MCPServerError(status.line())
            if self._task is not None:
                log.info("MCP server %s: connecting again", self.name)
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            self._stop = asyncio.Event()
            self._task = asyncio.create_task(self._hold(ready, self._stop), name=f"mcp:{self.name}")
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    self._client = await asyncio.shield(ready)
            except TimeoutError:
                self._task.cancel()
                self._started(False, f"no answer within {format_seconds(CONNECT_TIMEOUT)}")
                raise MCPServerError(f"the MCP server {self.name!r} did not answer within "
                                     f"{format_seconds(CONNECT_TIMEOUT)}") from None
            except Exception as exc:
                self._started(False, self._start_error(exc))
                if isinstance(exc, MCPServerError):
                    raise
                raise MCPServerError(f"could not connect to the MCP server {self.name!r}: "
                                     f"{type(exc).__name__}: {exc}") from None
            self._started(True)
            self._stale = True
            return self._client

    def _start_error(self, exc: Exception) -> str:
        """Why it did not start, and for a command where its own words went (its stderr)."""
        where = getattr(self.stderr, "name", None) if self.stderr is not None else "this process's standard error"
        said = f"; its output is in {where}" if self.command is not None and isinstance(where, str) else ""
        return f"{type(exc).__name__}: {exc}{said}"

    def _transport(self, stack: AsyncExitStack) -> Any:
        if self.url is not None:
            http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0),
                                      event_hooks={"request": [trace_headers]})
            stack.push_async_callback(http.aclose)
            return streamable_http_client(self.url, http_client=http)
        assert self.command is not None
        params = StdioServerParameters(command=self.command, args=self.args, env=self.env or None, cwd=self.cwd)
        return stdio_client(params, errlog=self.stderr or sys.stderr)

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """The connection's task: open it, keep it until ``stop``, notice when it breaks."""
        try:
            async with AsyncExitStack() as stack:
                client = Client(self._transport(stack), cache=None, elicitation_callback=self._live.on_elicit,
                                sampling_callback=self._live.on_sample, message_handler=self._on_message)
                await stack.enter_async_context(client)
                ready.set_result(client)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch_changes, client)
                    await stop.wait()
                    tg.cancel_scope.cancel()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(_first(exc))
            elif not stop.is_set():
                log.warning("MCP server %s: the connection ended (%s)", self.name, _first(exc))
        finally:
            self._stale = True

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.ServerNotification) and isinstance(message, mt.ToolListChangedNotification):
            self._stale = True
        await anyio.lowlevel.checkpoint()

    async def _watch_changes(self, client: Client) -> None:
        """On 2026-07-28 connections, tool-list changes arrive on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._stale = True
        except ListenNotSupportedError:
            return  # older servers send notifications/tools/list_changed (``_on_message``)
        except Exception as exc:
            log.info("MCP server %s: not watching for tool-list changes (%s: %s)", self.name,
                     type(exc).__name__, exc)


def _first(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (what the task groups of the SDK raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def toolsets_from_config(path: str, *, stderr: TextIO | Callable[[str], TextIO] | None = None,
                         sampling: SamplingMode = "ask") -> list[MCPToolset]:
    """One ``MCPToolset`` per server of the ``--mcp-config`` file at ``path``, each answering
    sampling requests as ``sampling`` says. A stdio server's standard error is ``stderr``, or
    what ``stderr(name)`` returns for it when that is a function (``turnstream serve`` logs it:
    server/child_stderr.py)."""
    from .config import load_mcp_config

    def stderr_of(name: str, entry: ServerConfig) -> TextIO | None:
        if not callable(stderr):
            return stderr
        return stderr(name) if entry.command is not None else None  # an HTTP server has none of ours

    config = load_mcp_config(path)
    return [MCPToolset.from_config(name, entry, stderr=stderr_of(name, entry), sampling=sampling)
            for name, entry in config.mcpServers.items()]


__all__ = ["MCPServerError", "MCPToolError", "MCPToolset", "toolsets_from_config"]
