"""Markdown in a terminal while it streams: ``MarkdownStream`` prints the finished paragraphs of
a text block once and redraws only the paragraph being written (``MarkdownPiece``), so a long
answer costs no more to draw than its last paragraph. ``render.Renderer`` uses it on a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment

MARKDOWN_REFRESH_PER_SECOND = 15


class MarkdownPiece:
    """Markdown text as a Rich renderable, for one piece of a streamed answer.

    ``lead`` puts one blank line before it (it follows an earlier piece of the same answer;
    Rich's own leading blank lines are dropped so the spacing stays one line). ``tail`` makes
    it the live part: only the last lines that fit on the screen, so that ``Live`` never has
    to redraw above the top of the terminal, followed by an empty line that the cursor rests
    on; it is shown whole, without that line, when it is finished. The lines are cached, so a
    redraw of text that did not change costs nothing.

    Two terminal habits shape this. The text is laid out one column short of the width: a
    line that fills the last column leaves the cursor waiting to wrap, and terminals differ on
    what the next newline or echoed character then does (an extra blank line, a line drawn
    twice). And what the terminal echoes while the answer streams (``^C`` when the user
    interrupts it, keys typed ahead) lands on the empty line below the live part, which the
    next redraw clears, instead of shifting the lines ``Live`` counts on erasing.
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
            width = max(1, options.max_width - 1)
            lines = console.render_lines(Markdown(text), options.update(width=width, height=None), pad=True)
            while lines and all(not seg.text.strip() and (seg.style is None or seg.style.bgcolor is None)
                                for seg in lines[0]):
                lines.pop(0)
            if lines and lead:
                lines.insert(0, [])
            if tail:
                lines = [*lines[-max(3, options.size.height - 3):], []]
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
