"""The terminal side of a chat: input that does not block the event loop (``LineReader``, so
Ctrl-C can cancel a running turn or an approval question instead of ending the program),
``ChatUI`` (the console, the input and the renderer; y/n approvals; one turn at a time), and
``converse``, the read–answer loop: the farewell gate first (a goodbye or thanks ends the chat
without a model call), then one turn per message.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Literal, TextIO

import orjson
from rich.console import Console
from rich.markup import escape

from ..agent import LOCAL_USER, Agent
from ..blocks import ToolUseBlock
from ..content import MediaPart
from ..errors import InvalidValue, TurnstreamError
from ..events import StreamEvent, ToolRequest
from ..lifecycle import close_out_stored
from ..loop import CANCELLED
from ..tools.tool import Tool
from .elicit import ask_elicitation
from .farewell import is_farewell
from .render import Renderer
from .typeahead import TypeAhead, terminal_fd
from .typed import ATTACH, Answer, attach, dropped_attachment, read_answer

GOODBYE = "Bye! (resume this conversation with: {command})"


# --- input ----------------------------------------------------------------------------------


class LineReader:
    """Reads lines from a file descriptor through the event loop, so a read can be cancelled.

    Bytes are decoded incrementally and split on newlines; lines pasted together are kept
    for the next reads. Where the loop cannot watch the descriptor (Windows), a thread reads.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdin
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._eof = False

    async def readline(self) -> str | None:
        """The next line without its newline, or None at end of input."""
        while "\n" not in self._buffer:
            if self._eof:
                rest, self._buffer = self._buffer, ""
                return rest or None
            chunk = await self._read_chunk()
            if not chunk:
                self._eof = True
                self._buffer += self._decoder.decode(b"", final=True)
            else:
                self._buffer += self._decoder.decode(chunk)
        line, self._buffer = self._buffer.split("\n", 1)
        return line.rstrip("\r")

    def discard(self) -> None:
        """Forget typed-ahead input (after Ctrl-C)."""
        self._buffer = ""

    async def read_text(self) -> str | None:
        """What was typed so far, newlines included, however much (a key pressed, a paste), or
        None at end of input: for a line edited key by key (editline.py)."""
        if not self._buffer and not self._eof:
            chunk = await self._read_chunk()
            if not chunk:
                self._eof = True
            self._buffer += self._decoder.decode(chunk, final=not chunk)
        text, self._buffer = self._buffer, ""
        return text or None

    def unread(self, text: str) -> None:
        """Give back what was read beyond a line, for the next reads."""
        self._buffer = text + self._buffer

    async def _read_chunk(self) -> bytes:
        loop = asyncio.get_running_loop()
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            line: str = await asyncio.to_thread(self.stream.readline)
            return line.encode()
        ready: asyncio.Future[None] = loop.create_future()

        def on_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(fd, on_ready)
        except (NotImplementedError, PermissionError, ValueError):
            return await asyncio.to_thread(os.read, fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        try:
            return os.read(fd, 65536)
        except BlockingIOError:
            return await self._read_chunk()


# --- the chat -------------------------------------------------------------------------------


class _Interrupts:
    """Ctrl-C: cancels the running turn if there is one; at the prompt, twice in a row quits."""

    def __init__(self) -> None:
        self.target: asyncio.Task[Any] | None = None
        self.at_prompt: asyncio.Task[Any] | None = None
        self.presses_at_prompt = 0

    def __call__(self) -> None:
        if self.target is not None and not self.target.done():
            # Once is enough: a second press must not interrupt the turn's own clean-up.
            if not self.target.cancelling():
                self.target.cancel()
        elif self.at_prompt is not None and not self.at_prompt.done():
            self.presses_at_prompt += 1
            self.at_prompt.cancel()


@contextlib.contextmanager
def _sigint(handler: Callable[[], None]) -> Iterator[bool]:
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        yield installed
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


class ChatUI:
    """The terminal side of one chat: console, input, renderer and Ctrl-C handling.

    ``steer`` (set by the local and the server chat) sends a line typed while a turn runs to
    that turn: True when the turn took it, False when no turn ran any more (the line is then
    ``carried`` to be the next message).
    """

    def __init__(self, console: Console, reader: LineReader) -> None:
        self.console = console
        self.reader = reader
        self.renderer = Renderer(console)
        self.interrupts = _Interrupts()
        self.steer: Callable[[str], Awaitable[bool]] | None = None
        self.carried: list[str] = []
        self.typing = TypeAhead(reader.readline, terminal_fd(reader.stream), self._typed)

    async def _typed(self, text: str) -> None:
        """A line typed while the turn runs: send it to the turn and say so."""
        if self.steer is None:
            return
        try:
            taken = await self.steer(text)
        except TurnstreamError as exc:
            self.renderer.note(f"[bold red]error:[/] [red]{escape(text)} was not sent: {escape(str(exc))}[/]")
            return
        if taken:
            self.renderer.note(f"[dim]↳ queued: {escape(text)}[/]")
        else:
            self.carry([text])

    def carry(self, texts: Sequence[str]) -> None:
        """Messages meant for a turn that ended before it read them: the next message."""
        if texts:
            self.carried.extend(texts)
            self.renderer.note(f"[dim]↳ not read by this turn, so it is your next message: "
                               f"{escape(' / '.join(texts))}[/]")

    def take_carried(self, prompt: str) -> str:
        """The carried messages as the next one, printed after ``prompt`` as if typed there."""
        line, self.carried = "\n\n".join(self.carried), []
        self.renderer.quiet()
        self.renderer.newline()
        self.console.print(prompt, end="", highlight=False)
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return line

    async def ask(self, prompt: str) -> str | None:
        """Print ``prompt`` and read a line; None at end of input, "" after Ctrl-C. During a
        turn the lines typed ahead wait meanwhile, so the answer is read here."""
        await self.typing.pause()
        try:
            return await self._ask(prompt)
        finally:
            self.typing.resume()

    async def _ask(self, prompt: str) -> str | None:
        self.renderer.quiet()
        self.renderer.newline()
        self.console.print(prompt, end="", highlight=False)
        task = asyncio.create_task(self.reader.readline())
        self.interrupts.at_prompt = task
        try:
            await asyncio.wait({task})
        finally:
            self.interrupts.at_prompt = None
        if task.cancelled():
            self.reader.discard()
            self.console.print()
            return ""
        self.interrupts.presses_at_prompt = 0
        return task.result()

    async def decide(self, name: str, tool_input: dict[str, Any]) -> Answer:
        """Ask inline whether a ``requires_approval`` tool may run (``read_answer`` says how
        the answer is read) and print what was decided."""
        args = orjson.dumps(tool_input).decode()
        if len(args) > 300:
            args = args[:300] + "…"
        answer = read_answer(await self.ask(f"[bold yellow]Allow {escape(name)}[/] [dim]{escape(args)}[/] "
                                            r"[bold yellow]\[y/N/a: always in this session][/] "
                                            "[dim](or say why not)[/] "))
        if answer.always:
            shown = f"[green]✓ always allowed in this session: {escape(name)}[/]"
        elif answer.allow:
            shown = "[green]✓ allowed[/]"
        else:
            shown = f"[red]✗ denied: {escape(answer.reason)}[/]" if answer.reason else "[red]✗ denied[/]"
        self.console.print(shown, highlight=False)
        self.renderer.waiting("running tools…")
        return answer

    async def approve(self, call: ToolUseBlock, tool: Tool) -> bool | Literal["always"]:
        """The approval hook of a ``ToolExecutor`` (the server chat's own client tools): as
        ``decide``, but a hook's denial carries no reason."""
        answer = await self.decide(call.name, call.input)
        return "always" if answer.always else answer.allow

    def error(self, message: str) -> None:
        """An error line (the chat goes on)."""
        self.renderer.quiet()
        self.renderer.newline()
        self.console.print(f"[bold red]error:[/] [red]{escape(message)}[/]", highlight=False, soft_wrap=True)

    async def run_turn(self, work: Callable[[], Coroutine[Any, Any, None]],
                       on_cancel: Callable[[], Awaitable[None]] | None = None) -> None:
        """Run one turn's ``work`` (which feeds ``self.renderer``); Ctrl-C cancels it, then
        ``on_cancel`` runs (where the turn must be stopped elsewhere, e.g. on a server). An
        exception is shown as one line, never a traceback."""
        self.renderer.waiting()
        task = asyncio.create_task(work())
        self.interrupts.target = task
        if self.steer is not None:
            self.typing.start()
        try:
            await asyncio.wait({task})
        finally:
            self.interrupts.target = None
            await self.typing.stop()
            self.renderer.quiet()
        if task.cancelled():
            if on_cancel is not None:
                await on_cancel()
            self.renderer.newline()
            self.console.print("[yellow]⏹ cancelled[/]", highlight=False)
        elif (exc := task.exception()) is not None:
            self.error(f"{type(exc).__name__}: {exc}")
        self.renderer.newline()

    async def turn(self, agent: Agent, message: str, session_id: str, parts: Sequence[MediaPart] = (),
                   parent_turn_id: str | None = None) -> None:
        """Stream one local turn (after ``parent_turn_id``, else the current leaf), answering what
        it asks (approvals, a budget's question, an MCP server's); Ctrl-C cancels it: while it
        streams the Agent closes it out as ``cancelled``, while it waits for an answer here the
        turn is closed out here."""
        waiting: list[str] = []

        async def consume() -> None:
            events = agent.stream([message, *parts] if parts else message, session_id=session_id,
                                  parent_turn_id=parent_turn_id)
            while True:  # again after each round of questions
                requests = [ev async for ev in self._shown(events) if isinstance(ev, ToolRequest)]
                if not requests:
                    return
                turn_id = requests[0].turn_id
                waiting[:] = [turn_id]
                await self._answer(agent, requests)
                waiting.clear()
                self.renderer.waiting("running tools…")
                events = agent.resume_stream(turn_id)

        async def close_waiting() -> None:
            if waiting and await agent.store.claim_turn(waiting[0], "awaiting_client", "running"):
                await close_out_stored(agent.store, waiting[0], "cancelled", CANCELLED)

        await self.run_turn(consume, on_cancel=close_waiting)
        # Lines sent during the turn's last step: no step read them.
        self.carry([m.text for m in await agent.store.take_queued(session_id) if m.text])


    async def _shown(self, events: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
        async for ev in events:
            self.renderer.handle(ev)
            yield ev

    async def _answer(self, agent: Agent, requests: Sequence[ToolRequest]) -> None:
        """Answer a paused turn's questions here (the local chat's tools all run on its side):
        a budget's "continue?" once for every call it holds, an approval per call (a call of a
        tool allowed "always" a moment ago was approved with it), an MCP server's question."""
        budget = [r for r in requests if r.budget is not None]
        if budget:
            answer = read_answer(await self.ask(r"[bold yellow]Continue? \[y/N][/] [dim](or say why not)[/] "))
            for req in budget:
                await agent.submit(req.turn_id, req.tool_use_id, approved=answer.allow, reason=answer.reason,
                                   decided_by=LOCAL_USER)
        allowed: set[str] = set()
        for req in requests:
            if req.budget is not None or (req.tool_name in allowed and req.note is None):
                continue
            if req.elicitation is not None:
                while True:  # an answer the turn refuses is asked again, not dropped
                    self.renderer.quiet()
                    reply = await ask_elicitation(self.ask, self.console, req.tool_name, req.elicitation)
                    try:
                        await agent.submit(req.turn_id, req.tool_use_id, decided_by=LOCAL_USER, **reply)
                    except InvalidValue as exc:
                        self.renderer.note(f"[red]✗ {escape(str(exc))}[/] (answer again, or /decline)")
                        continue
                    break
                continue
            if req.note:
                self.renderer.note(f"[yellow]{escape(req.note)}[/]")
            answer = await self.decide(req.tool_name, req.input)
            await agent.submit(req.turn_id, req.tool_use_id, approved=answer.allow, reason=answer.reason,
                               always=answer.always, decided_by=LOCAL_USER)
            if answer.always:
                allowed.add(req.tool_name)


async def converse(chat: ChatUI, send: Callable[[str, list[MediaPart]], Awaitable[None]], resume_command: str, *,
                   first: Callable[[], Awaitable[None]] | None = None,
                   commands: Mapping[str, Callable[[str], Awaitable[None]]] | None = None) -> None:
    """The read–answer loop until the user leaves: Ctrl-D, Ctrl-C twice at the prompt, or a
    message that is only a farewell (which never reaches the model). ``/attach PATH`` adds an
    image or PDF to the next message, as does a line that is only such a file's path (a file
    dropped on the terminal). ``first`` runs before the first prompt, with Ctrl-C
    already handled; a line whose first word is one of ``commands`` runs it (with the rest of the
    line) instead of being sent. Ends with
    the goodbye line naming ``resume_command``."""
    console = chat.console
    pending: list[MediaPart] = []
    with _sigint(chat.interrupts):
        if first is not None:
            await first()
        while True:
            prompt = "\n[bold green]you ›[/] "
            line = chat.take_carried(prompt) if chat.carried else await chat.ask(prompt)
            if line is None:
                break
            if line == "":
                if chat.interrupts.presses_at_prompt >= 2:
                    break
                if chat.interrupts.presses_at_prompt == 1:
                    console.print("[dim](press Ctrl-C again or Ctrl-D to quit)[/]", highlight=False)
                continue
            message = line.strip()
            if not message:
                continue
            name, _, args = message.partition(" ")
            if commands and name in commands:
                await commands[name](args.strip())
                continue
            if message == ATTACH or message.startswith(ATTACH + " "):
                attach(console, message, pending)
                continue
            if (dropped := dropped_attachment(message)) is not None:  # a file dropped on the terminal
                attach(console, f"{ATTACH} {shlex.quote(str(dropped))}", pending)
                continue
            if is_farewell(message) and not pending:
                break
            parts, pending = pending, []
            await send(message, parts)
    chat.renderer.newline()
    console.print(GOODBYE.format(command=resume_command), highlight=False, markup=False, soft_wrap=True)

