"""``turnstream chat --server URL --key KEY``: the turn runs on a turnstream server, the tools here.

The pattern of an IDE whose agent runs elsewhere (seed 003): this client declares its local
tools (``list_directory``, ``read_file``, ``calculator``) as *client tools* of each turn
(SPEC §4, §7). The server streams the turn's events (SPEC §8); when the model calls one of
them the stream ends with ``tool_request`` events and ``turn_complete`` with status
``awaiting_client``. The client runs each call here — arguments validated by the tool,
file paths confined to ``--root``, failures turned into ``is_error`` results reading
``TypeName: message`` — and posts the result by ``tool_use_id``. The server then resumes the
turn, and the client follows it on the events route from the last event id it saw, until a
``turn_complete`` with a final status.

Events are decoded back into the objects of ``turnstream.events`` and fed to the same
``Renderer`` as the local chat, so both look alike. A broken stream is picked up again from
the last event id. Ctrl-C cancels the turn on the server. Every HTTP failure becomes one
clear line (``RemoteError``), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, TextIO

import httpx2 as httpx
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from ..blocks import ToolResultBlock, ToolUseBlock, Turn
from ..client import RemoteAPI, client_tool_spec, decode_event, split_server_url
from ..errors import RemoteError, RemoteStreamBroken, ServerError
from ..events import ToolRequest, TurnComplete
from ..sse_decoder import SSEEvent
from ..tools.executor import ToolExecutor
from ..tools.tool import Tool
from ..toolsets import calculator_tool, make_file_tools
from .ui import ChatUI, LineReader, converse, show_history

MAX_RECONNECTS = 3
"""How many times a broken event stream is picked up again (from the last event id) in a row."""
CANCEL_TIMEOUT = 10.0
FINAL = ("complete", "failed", "cancelled", "interrupted")


# --- the chat -------------------------------------------------------------------------------


class RemoteChat:
    """One chat session on a server: sends turns, answers their tool requests with local tools."""

    def __init__(self, api: RemoteAPI, chat: ChatUI, session_id: str, tools: list[Tool]) -> None:
        self.api = api
        self.chat = chat
        self.session_id = session_id
        self.tools = {t.name: t for t in tools}
        self.client_tools = [client_tool_spec(t) for t in tools]
        self.executor = ToolExecutor(self.tools, approver=chat.approve)
        self.turn_id: str | None = None
        self.last_id: str | None = None

    @property
    def _session_path(self) -> str:
        return f"/api/sessions/{self.session_id}"

    # one message

    async def send(self, message: str) -> None:
        """Run one turn for ``message``; Ctrl-C cancels it on the server."""
        self.turn_id = self.last_id = None
        await self.chat.run_turn(lambda: self._turn(message), on_cancel=self.cancel)

    async def _post_turn(self, message: str) -> AsyncGenerator[SSEEvent, None]:
        """``POST …/turns``; a declared tool that shadows a server tool of this session (422)
        is left out — the server's own tool of that name serves — and the post is retried."""
        while True:
            body = {"message": message, "client_tools": self.client_tools}
            try:
                stream = self.api.events("POST", f"{self._session_path}/turns", body=body,
                                         on_headers=self._turn_headers)
                async with contextlib.aclosing(stream) as events:
                    async for ev in events:
                        yield ev
                return
            except ServerError as exc:
                if not self._drop_shadowed(exc):
                    raise

    def _turn_headers(self, headers: httpx.Headers) -> None:
        tid = headers.get("x-turn-id")
        if tid:
            self.turn_id = tid

    def _drop_shadowed(self, exc: ServerError) -> bool:
        if exc.status != 422:
            return False
        drop: set[str] = set()
        for d in exc.detail:
            loc = d.get("loc") or []
            if (len(loc) == 4 and loc[:2] == ["body", "client_tools"] and loc[3] == "name"
                    and isinstance(loc[2], int) and 0 <= loc[2] < len(self.client_tools)
                    and "server tool" in str(d.get("msg", ""))):
                drop.add(self.client_tools[loc[2]]["name"])
        if not drop:
            return False
        self.client_tools = [t for t in self.client_tools if t["name"] not in drop]
        for name in sorted(drop):
            self.chat.console.print(f"[dim]({escape(name)} is a server tool in this session: it runs there)[/]",
                                    highlight=False)
        return True

    def _follow(self) -> AsyncGenerator[SSEEvent, None]:
        assert self.turn_id is not None
        return self.api.events("GET", f"{self._session_path}/turns/{self.turn_id}/events",
                               last_event_id=self.last_id)

    async def _turn(self, message: str) -> None:
        try:
            await self._drive(self._post_turn(message))
        except RemoteError as exc:
            self.chat.error(str(exc))

    async def _drive(self, source: AsyncGenerator[SSEEvent, None]) -> None:
        """Render the turn's events until it ends, answering its tool requests on the way."""
        pending: list[ToolRequest] = []
        reconnects = 0
        while True:
            final: TurnComplete | None = None
            broken: RemoteStreamBroken | None = None
            try:
                async with contextlib.aclosing(source) as events:
                    async for sse in events:
                        final = self._take(sse, pending) or final
            except RemoteStreamBroken as exc:
                broken = exc
            if final is None:
                if self.turn_id is None or reconnects >= MAX_RECONNECTS:
                    raise broken or RemoteError("the server closed the event stream before the turn ended")
                reconnects += 1
                source = self._follow()
                continue
            reconnects = 0
            if final.status != "awaiting_client":
                self.chat.renderer.handle(final)
                return
            requests, pending = pending, []
            await self._answer_or_cancel(requests)
            self.chat.renderer.waiting()
            source = self._follow()

    def _take(self, sse: SSEEvent, pending: list[ToolRequest]) -> TurnComplete | None:
        if sse.id:
            self.last_id = sse.id
            self.turn_id = sse.id.rpartition(":")[0] or self.turn_id
        ev = decode_event(sse)
        if ev is None:
            return None
        if isinstance(ev, ToolRequest):
            pending.append(ev)  # answered once the stream pauses
            return None
        if isinstance(ev, TurnComplete):
            return ev
        self.chat.renderer.handle(ev)
        return None

    async def _answer_or_cancel(self, requests: list[ToolRequest]) -> None:
        """Answer every request; if that fails the turn is cancelled, so the session is not
        left waiting for answers that will never come."""
        try:
            if not requests:
                raise RemoteError("the turn waits for tool results, but no tool request reached this client")
            for req in requests:
                await self._answer(req)
        except RemoteError:
            await self.cancel()
            raise

    async def _answer(self, req: ToolRequest) -> None:
        call = ToolUseBlock(tool_use_id=req.tool_use_id, name=req.tool_name, input=req.input)
        body: dict[str, Any] = {"tool_use_id": req.tool_use_id, "turn_id": self.turn_id}
        if req.executor == "client":
            outcome = await self.executor.decide(call)  # unknown tool, or approval asked here
            self.chat.renderer.waiting(f"running {req.tool_name} here…")
            await self.executor.run([outcome], session_id=self.session_id, turn_id=self.turn_id or "")
            self.chat.renderer.quiet()
            body |= {"content": outcome.content, "is_error": outcome.is_error}
        else:  # a server tool that needs the user's approval
            body["approved"] = await self.chat.approve(call, Tool.client(req.tool_name))
        reply = await self.api.call("POST", f"{self._session_path}/tool-results", body)
        if self.last_id is None and isinstance(reply, dict) and isinstance(reply.get("last_event_id"), str):
            self.last_id = reply["last_event_id"]

    async def cancel(self) -> None:
        """Cancel the current turn on the server (after Ctrl-C). A turn that already ended is fine."""
        turn_ids = [self.turn_id] if self.turn_id else await self._open_turn_ids()
        for tid in turn_ids:
            try:
                await asyncio.wait_for(self.api.call("POST", f"{self._session_path}/turns/{tid}/cancel"),
                                       CANCEL_TIMEOUT)
            except ServerError as exc:
                if exc.status != 409:  # 409: it is not running any more
                    self.chat.error(f"could not cancel the turn on the server: {exc}")
            except (RemoteError, TimeoutError) as exc:
                self.chat.error(f"could not cancel the turn on the server: {exc}")

    async def _open_turn_ids(self) -> list[str]:
        """Ctrl-C came before the turn's id did: the session's open turns are this client's."""
        try:
            turns = await self.turns()
        except RemoteError:
            return []
        return [t.id for t in turns if t.status in ("running", "awaiting_client")]

    async def turns(self) -> list[Turn]:
        detail = await self.api.call("GET", self._session_path)
        out: list[Turn] = []
        for raw in detail.get("turns", []) if isinstance(detail, dict) else []:
            with contextlib.suppress(ValidationError):
                out.append(Turn.model_validate(raw))
        return out

    # a turn left open by an earlier run of this client

    async def settle_open_turn(self, turns: list[Turn]) -> None:
        """A resumed session whose last turn still waits for this client's tools (the client
        stopped while they ran): run them now and follow the turn to its end."""
        last = turns[-1] if turns else None
        if last is None or last.status != "awaiting_client":
            if last is not None and last.status == "running":
                self.chat.console.print(f"[yellow]the last turn ({escape(last.id)}) is still running on the "
                                        "server[/]", highlight=False)
            return
        answered = {b.tool_use_id for b in last.blocks if isinstance(b, ToolResultBlock)}
        calls = [b for b in last.blocks if isinstance(b, ToolUseBlock) and b.tool_use_id not in answered]
        foreign = sorted({b.name for b in calls if b.name not in self.tools})
        if foreign or not calls:
            # Another client's tools, or a server tool's approval: not this client's to answer.
            self.chat.console.print(f"[yellow]the last turn ({escape(last.id)}) waits for another client "
                                    f"({escape(', '.join(foreign) or 'no tool of this one')})[/]", highlight=False)
            return
        requests = [ToolRequest(tool_use_id=b.tool_use_id, tool_name=b.name, input=b.input, turn_id=last.id)
                    for b in calls]
        self.chat.console.print(f"[yellow]the last turn ({escape(last.id)}) waits for "
                                f"{len(requests)} tool call(s) of this client: answering them now[/]",
                                highlight=False)
        self.turn_id, self.last_id = last.id, None

        async def finish() -> None:
            try:
                await self._answer_or_cancel(requests)
                if self.last_id is None:
                    raise RemoteError("the server did not say where to follow the turn from")
                await self._drive(self._follow())
            except RemoteError as exc:
                self.chat.error(str(exc))

        await self.chat.run_turn(finish, on_cancel=self.cancel)


async def _open_session(api: RemoteAPI, session: str | None, model: str | None) -> tuple[str, str]:
    """The session's id and model: the one named by ``--session``, else a new one."""
    if session is not None:
        data = await api.call("GET", f"/api/sessions/{session}")
    else:
        body: dict[str, Any] = {"toolset": "none"}  # the server titles it from the first message
        if model:
            body["model"] = model
        data = await api.call("POST", "/api/sessions", body)
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise RemoteError("the server's session answer has no id")
    return data["id"], str(data.get("model") or "")


async def run_remote_chat(
    server: str,
    key: str | None,
    root: Path,
    session: str | None = None,
    *,
    model: str | None = None,
    extra_tools: list[Tool] | None = None,
    console: Console | None = None,
    stdin: TextIO | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """The terminal chat against a turnstream server at ``server``; returns the exit status.

    ``key`` is the user's API key (or in ``server``'s ``#key=`` fragment); ``root`` is the
    directory the local file tools may read; ``session`` resumes a session of this user on
    the server; ``model`` is used for a new session (the server's default otherwise).
    """
    console = console or Console(highlight=False)
    base, url_key = split_server_url(server)
    key = key or url_key
    if not base.startswith(("http://", "https://")):
        console.print(f"[bold red]error:[/] --server must be an http:// or https:// URL, not {escape(server)!r}",
                      highlight=False)
        return 2
    if not key:
        console.print("[bold red]error:[/] --server needs an API key: pass --key KEY or set TURNSTREAM_KEY "
                      "(`turnstream serve` prints a login key, `turnstream users add NAME` makes one)",
                      highlight=False)
        return 2
    try:
        real_root = root.expanduser().resolve(strict=True)
        tools = [*make_file_tools(real_root), calculator_tool, *(extra_tools or [])]
    except OSError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    chat = ChatUI(console, LineReader(stdin))
    api = RemoteAPI(base, key, transport=transport)
    try:
        try:
            session_id, session_model = await _open_session(api, session, model)
            remote = RemoteChat(api, chat, session_id, tools)
            history = await remote.turns() if session is not None else []
        except RemoteError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            return 2
        console.print(f"[bold]turnstream chat[/] · {escape(base)} · {escape(session_model or 'server model')} · "
                      f"files under {escape(str(real_root))} (tools run here)", highlight=False)
        console.print(f"[dim]session {session_id} · Ctrl-C stops a reply · Ctrl-D or 'bye' quits[/]",
                      highlight=False)
        show_history(console, history)
        await converse(chat, remote.send, f"turnstream chat --server {base} --session {session_id}",
                       first=lambda: remote.settle_open_turn(history))
        return 0
    finally:
        await api.aclose()
