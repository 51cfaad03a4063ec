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
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TextIO

import orjson
from rich.console import Console
from rich.markup import escape

from ..agent import Agent
from ..blocks import TextBlock, ToolUseBlock, Turn
from ..tools.tool import Tool
from .farewell import is_farewell
from .render import Renderer

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
    """The terminal side of one chat: console, input, renderer and Ctrl-C handling."""

    def __init__(self, console: Console, reader: LineReader) -> None:
        self.console = console
        self.reader = reader
        self.renderer = Renderer(console)
        self.interrupts = _Interrupts()

    async def ask(self, prompt: str) -> str | None:
        """Print ``prompt`` and read a line; None at end of input, "" after Ctrl-C."""
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

    async def approve(self, call: ToolUseBlock, tool: Tool) -> bool:
        """The Agent's approval hook: ask y/n inline before a ``requires_approval`` tool runs."""
        args = orjson.dumps(call.input).decode()
        if len(args) > 300:
            args = args[:300] + "…"
        answer = await self.ask(f"[bold yellow]Allow {escape(call.name)}[/] [dim]{escape(args)}[/] "
                                r"[bold yellow]\[y/N][/] ")
        ok = (answer or "").strip().lower() in ("y", "yes")
        self.console.print("[green]✓ allowed[/]" if ok else "[red]✗ denied[/]", highlight=False)
        self.renderer.waiting("running tools…")
        return ok

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
        try:
            await asyncio.wait({task})
        finally:
            self.interrupts.target = None
            self.renderer.quiet()
        if task.cancelled():
            if on_cancel is not None:
                await on_cancel()
            self.renderer.newline()
            self.console.print("[yellow]⏹ cancelled[/]", highlight=False)
        elif (exc := task.exception()) is not None:
            self.error(f"{type(exc).__name__}: {exc}")
        self.renderer.newline()

    async def turn(self, agent: Agent, message: str, session_id: str) -> None:
        """Stream one local turn; Ctrl-C cancels it (the Agent closes the turn out as ``cancelled``)."""

        async def consume() -> None:
            async for ev in agent.stream(message, session_id=session_id):
                self.renderer.handle(ev)

        await self.run_turn(consume)


async def converse(chat: ChatUI, send: Callable[[str], Awaitable[None]], resume_command: str, *,
                   first: Callable[[], Awaitable[None]] | None = None) -> None:
    """The read–answer loop until the user leaves: Ctrl-D, Ctrl-C twice at the prompt, or a
    message that is only a farewell (which never reaches the model). ``first`` runs before
    the first prompt, with Ctrl-C already handled. Ends with the goodbye line naming
    ``resume_command``."""
    console = chat.console
    with _sigint(chat.interrupts):
        if first is not None:
            await first()
        while True:
            line = await chat.ask("\n[bold green]you ›[/] ")
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
            if is_farewell(message):
                break
            await send(message)
    chat.renderer.newline()
    console.print(GOODBYE.format(command=resume_command), highlight=False, markup=False, soft_wrap=True)


def show_history(console: Console, turns: list[Turn], keep: int = 3) -> None:
    if not turns:
        return
    console.print(f"[dim]… {len(turns)} earlier turn(s); the last ones:[/]", highlight=False)
    for t in turns[-keep:]:
        console.print(f"[bold]you ›[/] {escape(t.input)}", highlight=False)
        answer = "".join(b.text for b in t.blocks if isinstance(b, TextBlock) and b.step == t.steps).strip()
        if answer:
            console.print(escape(answer), style="dim", highlight=False)
