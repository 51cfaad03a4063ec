"""How the terminal chat shows a turn: ``Renderer`` turns the events of a turn (SPEC §8) into
Rich output, in arrival order: text streamed as it comes (rendered as Markdown on a terminal,
see ``MarkdownStream``), thinking dimmed, a tool call's arguments streamed live with its result
beneath, a spinner while the model has not said anything yet (and while tools run, with the
progress a call reports: ``running tools… ⚙ crunch 2/5 (40%) · reading``). In a session of several agents
(docs/agents.md) the name of the agent that speaks is printed before its first block of a turn,
and again at each hand-off. The local chat and the server client (``chat/remote.py``) feed it
the same events, so both look alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from ..blocks import CompactionBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Usage, UserBlock
from ..events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BudgetWarning,
    ContextManaged,
    ErrorEvent,
    StepRestart,
    StepStart,
    StepUsage,
    StreamEvent,
    ToolProgress,
    ToolRequest,
    TurnComplete,
    TurnStart,
)
from ..pricing import dollars
from .markdown import MarkdownPiece, MarkdownStream

RESULT_PREVIEW_LINES = 8
RESULT_PREVIEW_LINE_CHARS = 200


def context_notice(ev: ContextManaged) -> str:
    """One line saying what was left out of a request to fit the model's context."""
    what = []
    if ev.cleared:
        what.append(f"{len(ev.cleared)} old tool result{'s' if len(ev.cleared) != 1 else ''} left out of what "
                    "the model reads")
    if ev.summarised:
        what.append(f"the first {ev.summarised} turns sent as a summary")
    why = "the model refused the request as too long; " if ev.retry else ""
    return (f"✂ {why}{', and '.join(what)}, to fit its context "
            f"(~{ev.tokens_before:,} → ~{ev.tokens_after:,} of {ev.window:,} tokens; the chat keeps them)")


def progress_line(tool_name: str, ev: ToolProgress) -> str:
    """The spinner's line while a call reports progress: ``⚙ crunch 2/5 (40%) · reading``."""
    done = f"{ev.progress:g}" + (f"/{ev.total:g}" if ev.total else "")
    share = f" ({ev.progress / ev.total:.0%})" if ev.total else ""
    message = f" · {ev.message}" if ev.message else ""
    return escape(f"running tools… ⚙ {tool_name} {done}{share}{message}")


def usage_line(usage: Usage, cost_nano_usd: int | None, steps: int) -> str:
    """A turn's usage in one line: ``1,234 in · 56 out · cache 900 read, 0 written · $0.0042 · 2 steps``.
    A server that reported no token counts (``usage.unknown``) is not shown as 0 tokens: the
    line says ``usage unknown``, or, when other steps reported theirs, gives those and says
    that some are missing."""
    counted = usage.input_tokens or usage.output_tokens
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out"] if counted or not usage.unknown else []
    if usage.unknown:
        parts.append("usage of some steps unknown" if counted else "usage unknown")
    if usage.cache_read_input_tokens or usage.cache_creation_input_tokens:
        parts.append(f"cache {usage.cache_read_input_tokens:,} read, {usage.cache_creation_input_tokens:,} written")
    if cost_nano_usd:
        parts.append(dollars(cost_nano_usd))
    parts.append(f"{steps} step{'s' if steps != 1 else ''}")
    return " · ".join(parts)


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
        self._agent: str | None = None
        self._cost: int | None = None
        """The turn's cost so far, from its ``usage`` events (None before the first)."""

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

    def note(self, markup: str) -> None:
        """A line of the chat's own amid a turn (a message typed meanwhile was queued): above the
        live paragraph or the spinner when one is shown, which go on beneath it."""
        if self._md is not None or self._status is not None:
            self.console.print(markup, highlight=False, soft_wrap=True)
        else:
            self._line(markup)

    def newline(self) -> None:
        if not self._at_line_start:
            self.console.print()
            self._at_line_start = True

    # events

    def handle(self, ev: StreamEvent) -> None:
        if isinstance(ev, TurnStart):
            self._agent = None
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
        elif isinstance(ev, StepUsage):
            self._cost = ev.turn_cost_nano_usd
            if ev.tool_use_id is not None:  # a sub-step: a model call the tool asked for (MCP sampling)
                name = self._names.get(ev.tool_use_id, "a tool")
                self._line(f"[dim]↳ {escape(name)} used the model: {ev.usage.input_tokens:,} tokens in, "
                           f"{ev.usage.output_tokens:,} out[/]")
        elif isinstance(ev, ContextManaged):
            self._line(f"[dim]{escape(context_notice(ev))}[/]")
        elif isinstance(ev, BudgetWarning):
            used = f"{ev.spent_tokens:,} of {ev.limit_tokens:,} tokens" if ev.limit_tokens is not None else (
                f"{dollars(ev.spent_nano_usd)} of {dollars(ev.limit_nano_usd or 0)}")
            self._line(f"[yellow]⚠ budget ({ev.scope.replace('_', ' ')}): {used} used[/]")
        elif isinstance(ev, ToolRequest) and ev.budget is not None:
            self._line(f"[yellow]⏸ {escape(ev.note or 'budget reached')}[/]")
        elif isinstance(ev, ToolRequest):
            if ev.elicitation is not None or (ev.requires_approval and ev.executor == "server"):
                return  # the chat asks the user itself (its approval question, chat/elicit.py)
            self._line(f"[yellow]… waiting for a client to run {escape(ev.tool_name)}[/]")
        elif isinstance(ev, ToolProgress):
            if self._status is not None:
                self._status.update(progress_line(self._names.get(ev.tool_use_id, "tool"), ev))
        elif isinstance(ev, ErrorEvent):
            self._line(f"[bold red]error:[/] [red]{escape(ev.message)}[/]")
        elif isinstance(ev, TurnComplete):
            self._complete(ev)

    def _speaker(self, agent: str | None) -> None:
        """Name the agent when it is not the one that spoke last in this turn."""
        if agent is None or agent == self._agent:
            return
        self._agent = agent
        self._line(f"[bold magenta]{escape(agent)}:[/]")

    def _start(self, ev: BlockStart) -> None:
        self._speaker(ev.agent)
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
        if blk is None and block is not None:
            self._speaker(block.agent)
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
        elif isinstance(block, UserBlock):
            if block.text:  # a message sent while the turn ran, read from the next step on
                self._line(f"[bold green]you, while it worked ›[/] {escape(block.text)}")
        elif isinstance(block, CompactionBlock):
            self._line(f"[dim]✂ the first {block.covers} turns are sent to the model as a summary from here on[/]")
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
        for a in block.attachments:  # a terminal draws no pictures: a line says what came back
            self.console.print(f"    🖼 {a.name or 'image'} ({a.media_type}, {a.size} bytes) from {name}",
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
        elif ev.stop_reason == "budget":
            self._line("[yellow](stopped: budget reached)[/]")
        if ev.status != "awaiting_client":
            self._line(f"[dim]↳ {usage_line(ev.usage, self._cost, ev.steps)}[/]")
            self._cost = None
        self._open.clear()
