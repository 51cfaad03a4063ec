"""Lines typed while a turn runs (docs/terminal.md, "Typing while it answers").

``TypeAhead`` reads whole lines from the chat's ``LineReader`` while a turn streams and hands
each to a callback, which sends it to the running turn. It reads only from a terminal (piped
input is a script of prompts and keeps its order), and pauses while the chat asks a question
(an approval, a budget's Continue?), so those answers keep their meaning. While it listens the
terminal does not echo: what is typed never lands amid the streaming answer, whose live
paragraph is redrawn in place; the line is shown once sent (``↳ queued: …``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

if sys.platform != "win32":
    import termios


def _exit_on_term(signum: int, frame: object) -> None:
    """SIGTERM as an exit, so that the ``atexit`` that turns echo back on runs."""
    raise SystemExit(128 + signum)


class _Echo:
    """The terminal's echo on one file descriptor, turned off and back (no-op off a terminal)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None
        self._registered = False

    def off(self) -> None:
        if sys.platform == "win32" or self._saved is not None:
            return
        try:
            saved = termios.tcgetattr(self.fd)
            quiet = list(saved)
            quiet[3] = int(quiet[3]) & ~termios.ECHO
            termios.tcsetattr(self.fd, termios.TCSANOW, quiet)
        except (termios.error, OSError):
            return
        self._saved = saved
        if not self._registered:  # echo comes back however the process ends, bar kill -9
            self._registered = True
            atexit.register(self.on)
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _exit_on_term)

    def on(self) -> None:
        if sys.platform == "win32" or self._saved is None:
            return
        saved, self._saved = self._saved, None
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(self.fd, termios.TCSANOW, saved)


class TypeAhead:
    """Reads the lines typed while a turn runs and gives each (stripped, not empty) to ``deliver``.

    ``start``/``stop`` bracket a turn; ``pause``/``resume`` bracket a question asked during it.
    A line already being delivered is always delivered: stopping waits for it.
    """

    def __init__(self, readline: Callable[[], Awaitable[str | None]], fd: int | None,
                 deliver: Callable[[str], Awaitable[None]]) -> None:
        self._readline = readline
        self._deliver = deliver
        self._echo = _Echo(fd) if fd is not None else None
        self._on = False
        self._task: asyncio.Task[None] | None = None
        self._sending: asyncio.Future[None] | None = None

    @property
    def enabled(self) -> bool:
        return self._echo is not None

    def start(self) -> None:
        """A turn began: listen until ``stop``."""
        if self._echo is None:
            return
        self._on = True
        self.resume()

    async def stop(self) -> None:
        """The turn ended: stop listening (a line being sent is sent first)."""
        self._on = False
        await self.pause()

    async def pause(self) -> None:
        """Leave the input to a question; echo comes back."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        if self._sending is not None:
            await asyncio.wait({self._sending})
            self._sending = None
        if self._echo is not None:
            self._echo.on()

    def resume(self) -> None:
        """The question was answered: listen again if the turn still runs."""
        if not self._on or self._task is not None or self._echo is None:
            return
        self._echo.off()
        self._task = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while (line := await self._readline()) is not None:
            text = line.strip()
            if text:
                self._sending = asyncio.ensure_future(self._deliver(text))
                # Shielded: a pause while it is on its way waits for it instead of losing it.
                await asyncio.shield(self._sending)
                self._sending = None


def terminal_fd(stream: TextIO) -> int | None:
    """The file descriptor of ``stream`` when it is a terminal, else None."""
    try:
        fd = stream.fileno()
        return fd if os.isatty(fd) else None
    except (AttributeError, OSError, ValueError):
        return None
