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
A server tool that needs the user's approval, and an MCP server's question (an elicitation,
asked field by field as in the local chat), are answered on the same route.
A line typed while the turn streams is posted to the turn route (``steer``: 202 queued), and
the turn the server starts from lines that no step read is followed after the one that ended.

Events are decoded back into the objects of ``turnstream.events`` and fed to the same
``Renderer`` as the local chat, so both look alike. A broken stream is picked up again from
the last event id. Ctrl-C cancels the turn on the server. Every HTTP failure becomes one
clear line (``RemoteError``), never a traceback.

Why one module of this size: one client of one session's turns (send, follow, answer, steer,
cancel), whose methods share the ids of the turns it follows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx2 as httpx
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from .. import branches
from ..blocks import ToolResultBlock, ToolUseBlock, Turn, UserBlock
from ..client import RemoteAPI, client_tool_spec, decode_event, split_server_url
from ..content import ImagePart, MediaPart
from ..errors import RemoteError, RemoteStreamBroken, ServerError
from ..events import BlockStop, Reconnect, ToolRequest, TurnComplete
from ..sse_decoder import SSEEvent
from ..tools.executor import ToolExecutor
from ..tools.tool import Tool
from ..toolsets import calculator_tool, make_file_tools
from .branching import RemoteBranching, remote_tree
from .elicit import ask_elicitation
from .history import show_history
from .ui import ChatUI, LineReader, converse

NEXT_TURN_WAIT = 10.0
"""How long to look for the turn the server starts from lines the followed turn never read."""
MAX_RECONNECTS = 3
"""How many times a broken event stream is picked up again (from the last event id) in a row."""
CANCEL_TIMEOUT = 10.0
FINAL = ("complete", "failed", "cancelled", "interrupted")


# --- the chat -------------------------------------------------------------------------------


BUSY_RETRIES = 5
"""How many times a turn refused by a server at capacity is sent again."""

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
        self._steerable = False  # the followed turn streams: a line typed now can go to it
        self._steering = asyncio.Lock()  # one line at a time; the turn's end waits for the one on its way
        self._unread: list[str] = []  # lines queued into the followed turn that no step took yet
        self._started: list[tuple[str, str]] = []  # (turn, line): a line that started a turn itself
        self._denied: set[str] = set()  # waiting calls a line denied (it came as the turn paused)

    @property
    def _session_path(self) -> str:
        return f"/api/sessions/{self.session_id}"

    # one message

    async def send(self, message: str, parts: Sequence[MediaPart] = (), *, parent: str | None = None,
                   again: str | None = None) -> None:
        """Run one turn for ``message`` and its images or PDFs; Ctrl-C cancels it on the server.
        ``parent``: the turn it follows (``branches.ROOT`` for none; left out, the current leaf);
        ``again``: a turn whose message the server answers again beside it, instead."""
        self.turn_id = self.last_id = None
        await self.chat.run_turn(lambda: self._turn(message, parts, parent, again), on_cancel=self.cancel)

    # lines typed while the turn runs (docs/steering.md)

    async def steer(self, text: str) -> bool:
        """Send a line typed meanwhile to the followed turn (no client tools in the body, which
        the route would refuse with 409); False when it cannot take it: the chat then sends it
        as the next message."""
        async with self._steering:
            if not self._steerable:
                return False
            try:
                status, reply, headers = await self.api.post_message(f"{self._session_path}/turns",
                                                                     {"message": text})
            except ServerError as exc:
                if exc.status == 409:  # it waits for this client's tools
                    return False
                raise
            if status == 202 and isinstance(reply, dict) and reply.get("outcome") == "denied":
                self._denied.update(str(t) for t in reply.get("tool_use_ids") or [])
                self.chat.renderer.note(f"[dim]↳ the turn was waiting for approvals: denied, with your words as "
                                        f"the reason: {escape(text)}[/]")
                return True
            if status == 202:
                self._unread.append(text)
                return True
            tid = headers.get("x-turn-id")  # the turn had ended: the line started the next one
            if tid:
                self._started.append((tid, text))
                self.chat.renderer.note(f"[dim]↳ the turn had ended, so this started the next one: "
                                        f"{escape(text)}[/]")
                return True
            raise RemoteError(f"the server answered {status} to a message sent while the turn ran")

    async def _next_turn(self) -> str | None:
        """The turn to follow after the one that ended: one a typed line started, or the one the
        server starts from the lines that no step read."""
        async with self._steering:  # a line on its way may yet start one
            self._steerable = False
        if self._started:
            return self._started.pop(0)[0]
        if not self._unread:
            return None
        texts, self._unread = self._unread, []
        self.chat.renderer.note(f"[dim]↳ not read by this turn, so the server starts the next one with it: "
                                f"{escape(' / '.join(texts))}[/]")
        tid = await self._turn_after(self.turn_id)
        if tid is None:
            self.chat.error("the server started no turn from the lines this turn did not read")
            self.chat.carry(texts)
        return tid

    async def _turn_after(self, turn_id: str | None) -> str | None:
        """The id of the session's first turn after ``turn_id``, once the server started it."""
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + NEXT_TURN_WAIT, 0.05
        while True:
            ids = [t.id for t in await self.turns()]
            after = ids[ids.index(turn_id) + 1:] if turn_id in ids else []
            if after:
                return after[0]
            if loop.time() >= deadline:
                return None
            await asyncio.sleep(pause)  # the server starts it as soon as the turn ends
            pause = min(pause * 2, 0.5)

    async def _post_turn(self, message: str, parts: Sequence[MediaPart] = (), parent: str | None = None,
                         again: str | None = None) -> AsyncGenerator[SSEEvent, None]:
        """``POST …/turns``; a declared tool that shadows a server tool of this session (422)
        is left out — the server's own tool of that name serves — and the post is retried.
        A server at capacity (503 with ``Retry-After``, nothing stored) is asked again after
        the time it names, up to ``BUSY_RETRIES`` times, saying so on the screen."""
        busy = 0
        while True:
            body: dict[str, Any] = {"message": message, "client_tools": self.client_tools}
            if parts:
                body["parts"] = [{"type": "image" if isinstance(p, ImagePart) else "file", "media_type": p.media_type,
                                  "data": base64.b64encode(p.data).decode(), "name": p.name} for p in parts]
            if parent is not None:
                body["parent_turn_id"] = parent or None
            path = f"{self._session_path}/turns" + (f"/{again}/regenerate" if again else "")
            try:
                stream = self.api.events("POST", path, body=None if again else body, on_headers=self._turn_headers)
                async with contextlib.aclosing(stream) as events:
                    async for ev in events:
                        yield ev
                return
            except ServerError as exc:
                if exc.status == 503 and busy < BUSY_RETRIES:
                    busy += 1
                    wait = min(max(exc.retry_after or 2, 1), 30)
                    self.chat.console.print(f"[yellow]The server is busy; retrying in {wait} s.[/]", highlight=False)
                    await asyncio.sleep(wait)
                    continue
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

    async def _turn(self, message: str, parts: Sequence[MediaPart], parent: str | None, again: str | None) -> None:
        try:
            await self._drive(self._post_turn(message, parts, parent, again))
            while (tid := await self._next_turn()) is not None:
                self.turn_id, self.last_id = tid, None
                self.chat.renderer.waiting()
                await self._drive(self._follow())
        except RemoteError as exc:
            self.chat.error(str(exc))

    async def _drive(self, source: AsyncGenerator[SSEEvent, None]) -> None:
        """Render the turn's events until it ends, answering its tool requests on the way."""
        pending: list[ToolRequest] = []
        reconnects = 0
        while True:
            final: TurnComplete | None = None
            broken: RemoteStreamBroken | None = None
            self._steerable = True
            try:
                async with contextlib.aclosing(source) as events:
                    async for sse in events:
                        final = self._take(sse, pending) or final
            except RemoteStreamBroken as exc:
                broken = exc
            finally:
                self._steerable = final is None  # a broken stream is followed again
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
            self._steerable = False  # the turn pauses: a line typed now is the next message
            pending.append(ev)  # answered once the stream pauses
            return None
        if isinstance(ev, TurnComplete):
            self._steerable = False
            return ev
        if isinstance(ev, Reconnect):
            return None  # the server stops; the stream ends and the turn is followed again
        if isinstance(ev, BlockStop) and isinstance(ev.block, UserBlock) and ev.block.text in self._unread:
            self._unread.remove(ev.block.text)  # a step took a line typed meanwhile
        self.chat.renderer.handle(ev)
        return None

    async def _answer_or_cancel(self, requests: list[ToolRequest]) -> None:
        """Answer every request; if that fails the turn is cancelled, so the session is not
        left waiting for answers that will never come."""
        try:
            if not requests:
                raise RemoteError("the turn waits for tool results, but no tool request reached this client")
            allowed: set[str] = set()
            denied, self._denied = self._denied, set()
            for req in requests:
                if req.tool_use_id in denied:
                    continue  # a line typed as the turn paused denied it already
                if (req.executor == "server" and req.note is None and req.elicitation is None
                        and req.tool_name in allowed):
                    continue  # the server approved it with the "always" answered for an earlier call
                if await self._answer(req):
                    allowed.add(req.tool_name)
        except RemoteError:
            await self.cancel()
            raise

    async def _answer(self, req: ToolRequest) -> bool:
        """Answer one request; True when the user allowed its tool for the rest of the session."""
        call = ToolUseBlock(tool_use_id=req.tool_use_id, name=req.tool_name, input=req.input)
        body: dict[str, Any] = {"tool_use_id": req.tool_use_id, "turn_id": self.turn_id}
        if req.elicitation is not None:  # a server tool's question (an MCP elicitation), asked here
            self.chat.renderer.quiet()
            body |= await ask_elicitation(self.chat.ask, self.chat.console, req.tool_name, req.elicitation)
        elif req.executor == "client":
            outcome = await self.executor.decide(call)  # unknown tool, or approval asked here
            self.chat.renderer.waiting(f"running {req.tool_name} here…")
            await self.executor.run([outcome], session_id=self.session_id, turn_id=self.turn_id or "")
            self.chat.renderer.quiet()
            body |= {"content": outcome.content, "is_error": outcome.is_error}
        else:  # a server tool that needs the user's approval
            answer = await self.chat.decide(req.tool_name, req.input)
            body |= {"approved": answer.allow, "always": answer.always, "reason": answer.reason}
        while True:
            try:
                reply = await self.api.call("POST", f"{self._session_path}/tool-results", body)
            except ServerError as exc:
                if exc.status != 422 or req.elicitation is None:
                    raise
                # the server refused the answer (its check is the last word): ask again
                self.chat.renderer.note(f"[red]✗ {escape(str(exc))}[/] (answer again, or /decline)")
                self.chat.renderer.quiet()
                body = {"tool_use_id": req.tool_use_id, "turn_id": self.turn_id}
                body |= await ask_elicitation(self.chat.ask, self.chat.console, req.tool_name, req.elicitation)
                continue
            break
        if self.last_id is None and isinstance(reply, dict) and isinstance(reply.get("last_event_id"), str):
            self.last_id = reply["last_event_id"]
        return bool(body.get("always"))

    async def cancel(self) -> None:
        """Cancel the current turn on the server (after Ctrl-C). A turn that already ended is fine."""
        self._steerable = False
        turn_ids = [self.turn_id] if self.turn_id else await self._open_turn_ids()
        await self._cancel_turns(turn_ids)
        # Lines typed meanwhile that no step read: the server starts a turn from them as this one
        # ends. Cancelled too; the lines are the next message, as in the local chat.
        started, self._started = self._started, []
        unread, self._unread = self._unread, []
        later = [tid for tid, _ in started]
        if unread:
            with contextlib.suppress(RemoteError):
                tid = await self._turn_after(later[-1] if later else self.turn_id)
                if tid is not None:
                    later.append(tid)
        await self._cancel_turns(later)
        self.chat.carry([text for _, text in started] + unread)

    async def _cancel_turns(self, turn_ids: list[str]) -> None:
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
            chat.steer = remote.steer
            history = branches.path(*await remote_tree(api, session_id)) if session is not None else []
        except RemoteError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            return 2
        console.print(f"[bold]turnstream chat[/] · {escape(base)} · {escape(session_model or 'server model')} · "
                      f"files under {escape(str(real_root))} (tools run here)", highlight=False)
        console.print(f"[dim]session {session_id} · Ctrl-C stops a reply · Ctrl-D or 'bye' quits[/]",
                      highlight=False)
        show_history(console, history)
        await converse(chat, remote.send, f"turnstream chat --server {base} --session {session_id}",
                       first=lambda: remote.settle_open_turn(history),
                       commands=RemoteBranching(chat, api, session_id, remote.send).commands())
        return 0
    finally:
        await api.aclose()
