"""``/edit``'s input line, pre-filled with the message being edited (docs/terminal.md).

The chat reads its other lines in the terminal's own line mode (``LineReader``), which cannot
start with text in it. For ``/edit`` the terminal is switched, for that one line, to reading key
by key without echo, and the line is kept and drawn here: the previous message is already
typed, the cursor at its end. Keys: letters insert at the cursor; Backspace and Delete; ← → and
Home/End (Ctrl-A, Ctrl-E); Ctrl-U deletes to the start, Ctrl-W a word; Enter sends; Escape (or
Ctrl-D on an empty line) gives up; so does Ctrl-C, read here as a key rather than a signal. A line
that wraps is redrawn from its first row, so long messages edit like short ones.

Where the input is not a terminal (a pipe, a file) nothing can be pre-filled: the previous
message is printed and the next line read is the new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from typing import Any

from rich.cells import cell_len
from rich.markup import escape

from .typeahead import terminal_fd
from .ui import ChatUI

if sys.platform != "win32":
    import termios

PROMPT = "edit › "
_SEQUENCE = re.compile(r"\x1b(?:\[[0-9;]*[@-~]|O[A-Za-z])")
_KEYS = {"\x1b[D": "left", "\x1bOD": "left", "\x02": "left", "\x1b[C": "right", "\x1bOC": "right", "\x06": "right",
         "\x1b[H": "home", "\x1bOH": "home", "\x1b[1~": "home", "\x01": "home",
         "\x1b[F": "end", "\x1bOF": "end", "\x1b[4~": "end", "\x05": "end",
         "\x1b[3~": "delete", "\x7f": "backspace", "\x08": "backspace", "\x15": "kill", "\x17": "word",
         "\x04": "eof", "\x03": "interrupt", "\x1b": "escape", "\n": "enter", "\r": "enter"}


def keys(text: str) -> list[str]:
    """``text`` read from the terminal as keys: a known key's name, else the character typed
    (other escape sequences and control characters are dropped)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        seq = _SEQUENCE.match(text, i)
        chunk = seq.group(0) if seq else text[i]
        i += len(chunk)
        if chunk in _KEYS:
            out.append(_KEYS[chunk])
        elif len(chunk) == 1 and chunk.isprintable():
            out.append(chunk)
    return out


class Line:
    """The text being edited and its cursor."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = len(text)

    def press(self, key: str) -> None:
        t, p = self.text, self.pos
        if len(key) == 1:
            self.text, self.pos = t[:p] + key + t[p:], p + 1
        elif key == "backspace" and p > 0:
            self.text, self.pos = t[:p - 1] + t[p:], p - 1
        elif key == "delete":
            self.text = t[:p] + t[p + 1:]
        elif key == "left":
            self.pos = max(p - 1, 0)
        elif key == "right":
            self.pos = min(p + 1, len(t))
        elif key == "home":
            self.pos = 0
        elif key == "end":
            self.pos = len(t)
        elif key == "kill":
            self.text, self.pos = t[p:], 0
        elif key == "word":
            start = len(t[:p].rstrip()) - len(t[:p].rstrip().split(" ")[-1]) if t[:p].strip() else 0
            self.text, self.pos = t[:start] + t[p:], start


class _Drawn:
    """Draws a ``Line`` after the prompt, across as many rows as it wraps to."""

    def __init__(self, write: Any, width: int, prompt_cells: int) -> None:
        self.write = write
        self.width = max(width, 2)
        self.prompt = prompt_cells
        self.row = 0  # the cursor's row, counted from the prompt's

    def draw(self, line: Line) -> None:
        out = f"\x1b[{self.row}A" if self.row else ""
        out += "\r" + (f"\x1b[{self.prompt}C" if self.prompt else "") + "\x1b[J" + line.text
        end = self.prompt + cell_len(line.text)
        if end and end % self.width == 0:
            out += "\n"  # past the last column: start the next row, where the cursor is taken to be
        end_row = end // self.width
        row, col = divmod(self.prompt + cell_len(line.text[:line.pos]), self.width)
        if end_row > row:
            out += f"\x1b[{end_row - row}A"
        out += "\r" + (f"\x1b[{col}C" if col else "")
        self.row = row
        self.write(out)

    def leave(self, line: Line) -> None:
        """Put the cursor after the line's end, on a new row."""
        end_row = (self.prompt + cell_len(line.text)) // self.width
        self.write((f"\x1b[{end_row - self.row}B" if end_row > self.row else "") + "\r\n")


async def edit_line(chat: ChatUI, previous: str) -> str | None:
    """The edited message: ``previous`` pre-filled on a terminal, else printed and replaced by the
    next line read. None when the user gives up (Escape, Ctrl-C, Ctrl-D, end of input)."""
    fd = terminal_fd(chat.reader.stream)
    if fd is None or sys.platform == "win32":
        chat.console.print(f"[dim]your last message:[/] {escape(previous)}", highlight=False)
        line = await chat.ask(f"[bold green]{PROMPT}[/]")
        return line or None
    chat.renderer.quiet()
    chat.renderer.newline()
    chat.console.print(f"[bold green]{PROMPT}[/]", end="", highlight=False)
    task = asyncio.create_task(_edit(chat, fd, previous))
    chat.interrupts.at_prompt = task
    try:
        await asyncio.wait({task})
    finally:
        chat.interrupts.at_prompt = None
    chat.interrupts.presses_at_prompt = 0  # Ctrl-C here gave up the edit, not half of leaving
    if task.cancelled():
        chat.reader.discard()
        chat.console.print()
        return None
    return task.result()


async def _edit(chat: ChatUI, fd: int, previous: str) -> str | None:
    out = chat.console.file

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    saved = termios.tcgetattr(fd)
    keyed = list(saved)
    # Ctrl-C comes as a key too (no SIGINT), so that it gives the edit up however fast it follows.
    keyed[3] = int(keyed[3]) & ~(termios.ICANON | termios.ECHO | termios.ISIG)
    keyed[6] = list(keyed[6])
    keyed[6][termios.VMIN], keyed[6][termios.VTIME] = 1, 0
    line = Line(previous)
    drawn = _Drawn(write, chat.console.width, cell_len(PROMPT))
    termios.tcsetattr(fd, termios.TCSANOW, keyed)
    try:
        drawn.draw(line)
        while True:
            text = await chat.reader.read_text()
            if text is None:
                drawn.leave(line)
                return None
            for n, key in enumerate(keys(text)):
                if key == "enter":
                    drawn.leave(line)
                    chat.reader.unread(text[_after_key(text, n):])
                    return line.text
                if key in ("escape", "interrupt") or (key == "eof" and not line.text):
                    drawn.leave(line)
                    return None
                line.press(key)
            drawn.draw(line)
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def _after_key(text: str, index: int) -> int:
    """Where, in ``text``, the ``index``-th key (as ``keys`` counts them) ends."""
    i = n = 0
    while i < len(text):
        seq = _SEQUENCE.match(text, i)
        chunk = seq.group(0) if seq else text[i]
        i += len(chunk)
        if chunk in _KEYS or (len(chunk) == 1 and chunk.isprintable()):
            if n == index:
                return i
            n += 1
    return i
