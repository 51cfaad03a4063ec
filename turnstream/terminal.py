"""The terminal chat (SPEC §11): ``turnstream chat``.

Four small parts, shared by the local chat and the server client (``remote.py``):

- ``Renderer`` turns the events of a turn (SPEC §8) into Rich output, in arrival order:
  text streamed as it comes (rendered as Markdown on a terminal, see ``MarkdownStream``),
  thinking dimmed, a tool call's arguments streamed live with its result beneath, a spinner
  while the model has not said anything yet.
- ``LineReader`` reads lines from stdin without blocking the event loop, so that Ctrl-C can
  cancel a running turn (and an approval question) instead of ending the program.
- ``ChatUI`` holds the console, the input and the renderer; it asks questions (the prompt,
  y/n approvals) and runs one turn at a time so that Ctrl-C cancels it.
- ``converse`` is the read–answer loop: the farewell gate first (a goodbye or thanks ends
  the chat without a model call), then one turn per message.

``run_chat`` runs the turns here, one ``Agent.stream`` per message, with the history in a
SQLite file so ``--session`` resumes a conversation. With ``--server`` the turns run on a
turnstream server instead (``remote.run_remote_chat``), fed to the same renderer.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.segment import Segment
from rich.status import Status

from .agent import LOCAL_USER, Agent, open_store_url
from .blocks import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn
from .errors import TurnstreamError
from .events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    StepRestart,
    StepStart,
    StreamEvent,
    ToolRequest,
    TurnComplete,
    TurnStart,
)
from .farewell import is_farewell
from .settings import CHAT_DEMO, Settings
from .store import Store
from .tools.tool import Tool
from .toolsets import calculator_tool, make_file_tools

RESULT_PREVIEW_LINES = 8
RESULT_PREVIEW_LINE_CHARS = 200
MARKDOWN_REFRESH_PER_SECOND = 15
GOODBYE = "Bye! (resume this conversation with: {command})"

SYSTEM_PROMPT = """\
You are a helpful assistant in a terminal. You can read files under {root} with list_directory \
and read_file (paths are relative to that directory), and compute with calculator.
Call a tool only when the answer needs it: for greetings, thanks and small talk, just answer. \
When the tools have given you what you need, answer in plain words and stop."""


def chat_db_url(home: Path) -> str:
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'chat.db'}"


# --- rendering ------------------------------------------------------------------------------


class MarkdownPiece:
    """Markdown text as a Rich renderable, for one piece of a streamed answer.

    ``lead`` puts one blank line before it (it follows an earlier piece of the same answer;
    Rich's own leading blank lines are dropped so the spacing stays one line). ``tail`` keeps
    only the last lines that fit on the screen: the live part, so that ``Live`` never has to
    redraw above the top of the terminal; it is shown whole when it is finished. The lines
    are cached, so a redraw of text that did not change costs nothing.
    """

    def __init__(self, text: str = "", *, lead: bool = False, tail: bool = False) -> None:
        self.text = text
        self.lead = lead
        self.tail = tail
        self._cache: tuple[tuple[str, bool, bool, int, int], list[list[Segment]]] | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text, lead, tail = self.text, self.lead, self.tail
        key = (text, lead, tail, options.max_width, options.size.height)
        if self._cache is not None and self._cache[0] == key:
            lines = self._cache[1]
        else:
            lines = console.render_lines(Markdown(text), options.update(height=None), pad=True)
            while lines and all(not seg.text.strip() and (seg.style is None or seg.style.bgcolor is None)
                                for seg in lines[0]):
                lines.pop(0)
            if lines and lead:
                lines.insert(0, [])
            if tail:
                lines = lines[-max(3, options.size.height - 2):]
            self._cache = (key, lines)
        for line in lines:
            yield from line
            yield Segment.line()


class MarkdownStream:
    """One text block streamed to a terminal as Markdown.

    Finished paragraphs are printed once, above; the paragraph being written is shown in a
    ``rich.live.Live`` region, redrawn at most ``MARKDOWN_REFRESH_PER_SECOND`` times a second
    (the last change is drawn by a timer, so nothing waits for the next delta). A paragraph is
    finished at a blank line followed by a line that does not start with a space, outside a
    fenced code block: what comes after can no longer change how it renders. So a redraw
    costs one paragraph, however long the answer.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.open = ""  # the text not printed for good yet
        self._piece = MarkdownPiece(tail=True)
        self._committed = False
        self._live: Live | None = None
        self._scan = 0  # where the first line not yet scanned starts, in ``open``
        self._fence: tuple[str, int] | None = None
        self._prev_blank = False
        self._last_refresh = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def feed(self, text: str) -> None:
        self.open += text
        cut = self._advance()
        if self._live is None:
            if not self.open.strip():
                return
            self._live = Live(self._piece, console=self.console, auto_refresh=False,
                              vertical_overflow="visible")
            self._live.start()
        if cut:
            done, self.open = self.open[:cut], self.open[cut:]
            self._scan -= cut
            self._piece.text, self._piece.lead = self.open, True
            # Printed above the live region, which is redrawn with the rest at the same time.
            self.console.print(MarkdownPiece(done, lead=self._committed))
            self._committed = True
            self._last_refresh = time.monotonic()
            return
        self._piece.text = self.open
        self._schedule()

    def close(self) -> None:
        """Show the rest whole, for good."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._live is not None:
            self._piece.tail = False
            self._live.stop()  # its last redraw stays on the screen
            self._live = None
        elif self.open.strip():
            self.console.print(MarkdownPiece(self.open, lead=self._committed))
        self.open = ""

    # paragraphs

    def _advance(self) -> int:
        """Scan the lines completed since the last call; the offset in ``open`` where the last
        finished paragraph ends (0 if none)."""
        text, pos, cut = self.open, self._scan, 0
        while True:
            if (0 < pos < len(text) and self._prev_blank and self._fence is None
                    and text[pos] not in " \t\r\n"):
                cut = pos
            nl = text.find("\n", pos)
            if nl < 0:
                break
            self._line(text[pos:nl])
            pos = nl + 1
        self._scan = pos
        return cut

    def _line(self, line: str) -> None:
        stripped = line.lstrip(" ")
        fence_indent = len(line) - len(stripped) <= 3
        if self._fence is not None:
            ch, n = self._fence
            if fence_indent and stripped.startswith(ch * n) and not stripped.strip().strip(ch):
                self._fence = None
            self._prev_blank = False
        elif fence_indent and stripped[:3] in ("```", "~~~"):
            ch = stripped[0]
            self._fence = (ch, len(stripped) - len(stripped.lstrip(ch)))
            self._prev_blank = False
        else:
            self._prev_blank = not line.strip()

    # throttled redraws

    def _schedule(self) -> None:
        if self._timer is not None:
            return
        wait = self._last_refresh + 1 / MARKDOWN_REFRESH_PER_SECOND - time.monotonic()
        if wait <= 0:
            self._refresh()
            return
        with contextlib.suppress(RuntimeError):  # without an event loop: by a later delta, or at the end
            self._timer = asyncio.get_running_loop().call_later(wait, self._refresh)

    def _refresh(self) -> None:
        self._timer = None
        if self._live is not None:
            self._live.refresh()
            self._last_refresh = time.monotonic()


@dataclass(slots=True)
class _Open:
    type: str
    name: str | None = None
    streamed: bool = False


class Renderer:
    """Prints one turn's events to a Rich console as they arrive.

    On a terminal, text blocks are rendered as Markdown while they stream (``MarkdownStream``);
    anything else printed first finishes the open one, so blocks never interleave. Elsewhere
    (output piped to a file) text is written as it comes, as plain text.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.markdown = console.is_terminal and not console.is_dumb_terminal
        self._open: dict[int, _Open] = {}
        self._names: dict[str, str] = {}
        self._status: Status | None = None
        self._md: MarkdownStream | None = None
        self._md_index: int | None = None
        self._at_line_start = True

    # spinner

    def waiting(self, message: str = "thinking…") -> None:
        """Show a spinner until the next thing is printed."""
        self._finish_text()
        if self._status is None and self.console.is_terminal:
            self._status = self.console.status(message, spinner="dots")
            self._status.start()

    def quiet(self) -> None:
        """Stop the spinner and finish the live text (before printing or asking)."""
        self._stop_spinner()
        self._finish_text()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _finish_text(self) -> None:
        if self._md is not None:
            md, self._md, self._md_index = self._md, None, None
            md.close()
            self._at_line_start = True

    def _markdown_delta(self, index: int, text: str) -> None:
        if self._md is None or self._md_index != index:
            self.quiet()
            self.newline()
            self._md, self._md_index = MarkdownStream(self.console), index
        elif self._status is not None:
            self._stop_spinner()
        self._md.feed(text)

    # output helpers

    def _write(self, text: str, style: str | None = None) -> None:
        if not text:
            return
        self.quiet()
        self.console.print(text, style=style, end="", markup=False, highlight=False, soft_wrap=True)
        self._at_line_start = text.endswith("\n")

    def _line(self, markup: str = "") -> None:
        """Print a whole line (Rich markup allowed), starting on a fresh line."""
        self.quiet()
        self.newline()
        self.console.print(markup, highlight=False, soft_wrap=True)
        self._at_line_start = True

    def newline(self) -> None:
        if not self._at_line_start:
            self.console.print()
            self._at_line_start = True

    # events

    def handle(self, ev: StreamEvent) -> None:
        if isinstance(ev, TurnStart):
            self.waiting()
        elif isinstance(ev, StepStart):
            if ev.step > 1:
                self.waiting()
        elif isinstance(ev, BlockStart):
            self._start(ev)
        elif isinstance(ev, BlockDelta):
            self._delta(ev)
        elif isinstance(ev, BlockStop):
            self._stop(ev)
        elif isinstance(ev, StepRestart):
            self._line(f"[yellow]↻ step {ev.step} restarted: {escape(ev.reason)}[/]")
            self._open.clear()
            self.waiting()
        elif isinstance(ev, ToolRequest):
            self._line(f"[yellow]… waiting for a client to run {escape(ev.tool_name)}[/]")
        elif isinstance(ev, ErrorEvent):
            self._line(f"[bold red]error:[/] [red]{escape(ev.message)}[/]")
        elif isinstance(ev, TurnComplete):
            self._complete(ev)

    def _start(self, ev: BlockStart) -> None:
        self._open[ev.index] = _Open(ev.type, ev.tool_name)
        if ev.tool_use_id and ev.tool_name:
            self._names[ev.tool_use_id] = ev.tool_name
        if ev.type == "tool_use":
            self._tool_header(ev.tool_name or "?")
        elif ev.type == "thinking":
            self.newline()
            self._write("💭 ", "dim")
        elif ev.type == "text":
            self.newline()

    def _tool_header(self, name: str) -> None:
        self.quiet()
        self.newline()
        self.console.print(f"[bold cyan]⚙ {escape(name)}[/] ", end="", highlight=False)
        self._at_line_start = False

    def _delta(self, ev: BlockDelta) -> None:
        blk = self._open.get(ev.index)
        if blk is None:
            return
        if ev.partial_json is not None:
            blk.streamed = True
            self._write(ev.partial_json, "dim cyan")
        elif ev.text:
            blk.streamed = True
            if blk.type == "text" and self.markdown:
                self._markdown_delta(ev.index, ev.text)
            else:
                self._write(ev.text, "dim italic" if blk.type == "thinking" else None)

    def _stop(self, ev: BlockStop) -> None:
        blk = self._open.pop(ev.index, None)
        block = ev.block
        if self._md_index == ev.index:
            self._finish_text()
        if isinstance(block, ToolUseBlock):
            if blk is None:
                self._tool_header(block.name)
            if blk is None or not blk.streamed:
                self._write(orjson.dumps(block.input).decode(), "dim cyan")
            if block.input_error:
                self._write(f"  ✗ {block.input_error}", "red")
            self.newline()
            self.waiting("running tools…")
        elif isinstance(block, ToolResultBlock):
            self._result(block)
        elif blk is None or not blk.streamed:
            # Not streamed: a block with no deltas, or one replayed by a resumed stream, which
            # carries finished blocks instead of the deltas it missed (block_start included).
            text = getattr(block, "text", None) or getattr(block, "thinking", None)
            thinking = isinstance(block, ThinkingBlock)
            if text and self.markdown and not thinking:
                self.quiet()
                self.newline()
                self.console.print(MarkdownPiece(text))
                self._at_line_start = True
            elif text:
                if blk is None:
                    self.newline()
                    if thinking:
                        self._write("💭 ", "dim")
                self._write(text, "dim italic" if thinking else None)
            self.newline()
        else:
            self.newline()

    def _result(self, block: ToolResultBlock) -> None:
        content = block.content if isinstance(block.content, str) else orjson.dumps(block.content).decode()
        lines = content.splitlines() or [""]
        shown = [ln if len(ln) <= RESULT_PREVIEW_LINE_CHARS else ln[:RESULT_PREVIEW_LINE_CHARS] + "…"
                 for ln in lines[:RESULT_PREVIEW_LINES]]
        style = "red" if block.is_error else "dim"
        name = self._names.get(block.tool_use_id, "tool")
        self.quiet()
        self.newline()
        marker = "✗" if block.is_error else "↳"
        for i, ln in enumerate(shown):
            prefix = f"  {marker} " if i == 0 else "    "
            self.console.print(prefix + ln, style=style, markup=False, highlight=False, soft_wrap=True)
        if len(lines) > RESULT_PREVIEW_LINES:
            self.console.print(f"    … {len(lines) - RESULT_PREVIEW_LINES} more lines from {name}",
                               style="dim", markup=False, highlight=False)
        self._at_line_start = True

    def _complete(self, ev: TurnComplete) -> None:
        self.quiet()
        self.newline()
        if ev.status == "cancelled":
            self._line("[yellow]⏹ cancelled[/]")
        elif ev.status == "failed":
            self._line("[red]✗ the turn failed[/]")
        elif ev.stop_reason == "max_steps":
            self._line("[yellow](stopped: step limit reached)[/]")
        elif ev.stop_reason == "max_tokens":
            self._line("[yellow](stopped: output limit reached)[/]")
        elif ev.stop_reason == "refusal":
            self._line("[yellow](the model declined)[/]")
        self._open.clear()


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


async def _open_session(store: Store, session: str | None, model: str) -> tuple[str, list[Turn]]:
    await store.open()
    if session is not None and await store.get_session(session) is not None:
        return session, await store.list_turns(session)
    created = await store.create_session(LOCAL_USER, model=model, session_id=session)
    return created.id, []


def show_history(console: Console, turns: list[Turn], keep: int = 3) -> None:
    if not turns:
        return
    console.print(f"[dim]… {len(turns)} earlier turn(s); the last ones:[/]", highlight=False)
    for t in turns[-keep:]:
        console.print(f"[bold]you ›[/] {escape(t.input)}", highlight=False)
        answer = "".join(b.text for b in t.blocks if isinstance(b, TextBlock) and b.step == t.steps).strip()
        if answer:
            console.print(escape(answer), style="dim", highlight=False)


async def run_chat(
    model: str,
    root: Path,
    session: str | None = None,
    *,
    db: str | None = None,
    home: Path | None = None,
    system: str | None = None,
    max_steps: int = 10,
    extra_tools: Sequence[Tool] = (),
    console: Console | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Run the terminal chat until the user leaves; returns the exit status.

    ``model`` is ``provider:model``; ``root`` is the directory the file tools may read;
    ``session`` resumes a stored conversation (or starts one under that id); ``db``
    overrides the store URL (default ``sqlite:///<home>/chat.db``, ``home`` being
    ``Settings().chat_home()`` unless given); ``extra_tools``
    are added to ``list_directory``, ``read_file`` and ``calculator``.
    """
    console = console or Console(highlight=False)
    chat = ChatUI(console, LineReader(stdin))
    try:
        real_root = root.expanduser().resolve(strict=True)
        tools = [*make_file_tools(real_root), calculator_tool, *extra_tools]
        store = open_store_url(db or chat_db_url(home or Settings.from_env().chat_home()))
        agent = Agent(model, tools=tools, system=system or SYSTEM_PROMPT.format(root=real_root),
                      max_steps=max_steps, store=store, approve=chat.approve)
    except (TurnstreamError, OSError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    try:
        session_id, history = await _open_session(store, session, agent.provider.origin)
        agent.session_id = session_id
        console.print(f"[bold]turnstream chat[/] · {escape(model)} · files under {escape(str(real_root))}",
                      highlight=False)
        console.print(f"[dim]session {session_id} · Ctrl-C stops a reply · Ctrl-D or 'bye' quits[/]",
                      highlight=False)
        show_history(console, history)

        async def send(message: str) -> None:
            await chat.turn(agent, message, session_id)

        await converse(chat, send, f"turnstream chat --session {session_id}")
        return 0
    finally:
        await agent.aclose()


def _log_to_file(path: Path) -> None:
    """Warnings (a tool's traceback, a transcript repair) go to a file, not over the chat."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("turnstream")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def main(settings: Settings, *, session: str | None = None) -> int:
    """``turnstream chat`` with the given settings (``model``, ``root``, ``server``, ``key``,
    ``home``). With ``server`` the turns run there and the local tools run here."""
    home = settings.chat_home()
    _log_to_file(home / "chat.log")
    if settings.server:
        from .remote import run_remote_chat

        return asyncio.run(run_remote_chat(settings.server, settings.key, settings.root, session,
                                           model=settings.model or None))
    model, demo = settings.default_model(CHAT_DEMO)
    if demo:
        print(f"No --model and no API key: using the scripted demo model {model}.", file=sys.stderr)
    return asyncio.run(run_chat(model, settings.root, session, home=home))
