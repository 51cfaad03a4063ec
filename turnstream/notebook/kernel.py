"""A notebook's subprocess kernel: one child Python process, one namespace, time and memory limits.

The child (``child.py``) speaks JSON lines over its stdin/stdout. The parent side blocks in a
worker thread on ``select`` with the run's deadline, so the kernel works under any event loop
and across loops. When a run passes its time limit, or the caller is cancelled, the child's
whole process group is killed; the next run starts a fresh child (``generation`` goes up and
every variable is gone). The memory limit is ``RLIMIT_AS`` inside the child: allocation
failures become ``MemoryError`` in the cell, and the kernel survives.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import anyio

from ..errors import KernelError
from .model import Output, error_output

CHILD = Path(__file__).with_name("child.py")
CHILD_ENV_KEYS = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP",
                  "SYSTEMROOT")
"""The only environment variables a kernel inherits: API keys and database URLs stay out of
reach of the code the model writes. (The kernel is not a sandbox: it can still read files.)"""


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in CHILD_ENV_KEYS}


@dataclass(frozen=True, slots=True)
class KernelLimits:
    """Limits for one notebook's kernel (defaults documented here and nowhere else)."""

    time_limit: float = 30.0
    """Seconds one cell may run before the child is killed and restarted."""
    memory_bytes: int | None = 2 * 1024**3
    """Address-space limit of the child (``RLIMIT_AS``); ``None`` for no limit."""
    start_timeout: float = 30.0
    """Seconds to wait for a new child to say it is ready."""


@dataclass(slots=True)
class ExecResult:
    status: Literal["success", "error"]
    outputs: list[Output] = field(default_factory=list)
    duration: float = 0.0
    restarted: bool = False
    """The child was lost during this run (time limit, cancel, crash): its namespace is gone."""


class _Channel:
    """The parent's end of one child's pipes. Closed by whoever finishes last with it."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._busy = False
        self._closing = False

    def exchange(self, msg: dict[str, Any] | None, deadline: float) -> dict[str, Any]:
        """Send ``msg`` (if any) and wait for the next line. TimeoutError, EOFError, OSError."""
        with self._lock:
            if self._closing:
                raise EOFError("kernel channel closed")
            self._busy = True
        try:
            if msg is not None:
                self._stdin.write(json.dumps(msg).encode() + b"\n")
                self._stdin.flush()
            return cast(dict[str, Any], json.loads(self._read_line(deadline)))
        finally:
            with self._lock:
                self._busy = False
                if self._closing:
                    self._close_files()

    def _read_line(self, deadline: float) -> bytes:
        fd = self._stdout.fileno()
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError("kernel process exited")
            self._buf += chunk

    def kill(self) -> int | None:
        """Kill the child's process group, reap it, and close the pipes once nobody reads them."""
        if self.proc.returncode is None:  # not reaped yet, so the group id is still ours
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        code = self._reap()
        with self._lock:
            self._closing = True
            if not self._busy:
                self._close_files()
        return code

    def _reap(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def _close_files(self) -> None:
        for f in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                f.close()


class Kernel:
    """One child process and its namespace. Runs are serialised; start is lazy."""

    def __init__(self, limits: KernelLimits | None = None, *, cwd: str | None = None,
                 python: str = sys.executable, env: dict[str, str] | None = None) -> None:
        self.limits = limits or KernelLimits()
        self.cwd = cwd
        self.python = python
        self.env = child_env() if env is None else env
        self.generation = 0
        """Rises each time a fresh child starts; a namespace belongs to one generation."""
        self._channel: _Channel | None = None
        self._lock = anyio.Lock()
        self._seq = 0
        self.last_start_seconds: float | None = None

    @property
    def pid(self) -> int | None:
        return self._channel.proc.pid if self._channel else None

    @property
    def alive(self) -> bool:
        return self._channel is not None and self._channel.proc.poll() is None

    async def start(self) -> None:
        """Start the child if it is not running."""
        async with self._lock:
            await self._ensure_started()

    async def _ensure_started(self) -> None:
        if self.alive:
            return
        if self._channel is not None:
            self._channel.kill()
            self._channel = None
        self._channel = await anyio.to_thread.run_sync(self._spawn)
        self.generation += 1

    def _spawn(self) -> _Channel:
        started = time.monotonic()
        args = [self.python, "-I", str(CHILD)]
        if self.limits.memory_bytes:
            args += ["--memory", str(self.limits.memory_bytes)]
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                cwd=self.cwd, env=self.env, start_new_session=True)
        channel = _Channel(proc)
        try:
            hello = channel.exchange(None, started + self.limits.start_timeout)
        except (TimeoutError, EOFError, OSError, ValueError) as exc:
            channel.kill()
            raise KernelError(f"the notebook kernel did not start: {exc!r}") from exc
        if hello.get("op") != "ready":
            channel.kill()
            raise KernelError(f"the notebook kernel sent {hello!r} instead of ready")
        self.last_start_seconds = time.monotonic() - started
        return channel

    async def execute(self, code: str, language: Literal["python", "sql"] = "python", *,
                      filename: str = "<cell>", result_name: str | None = None,
                      time_limit: float | None = None) -> ExecResult:
        """Run one cell. Never raises for the cell's own failures; KernelError if no child starts."""
        limit = self.limits.time_limit if time_limit is None else time_limit
        async with self._lock:
            await self._ensure_started()
            channel = self._channel
            assert channel is not None
            self._seq += 1
            msg = {"id": self._seq, "op": "run", "language": language, "code": code,
                   "filename": filename, "result_name": result_name}
            started = time.monotonic()
            try:
                reply = await anyio.to_thread.run_sync(
                    channel.exchange, msg, started + limit, abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                self._lose(channel)
                raise
            except TimeoutError:
                self._lose(channel)
                err = error_output(
                    "TimeoutError",
                    f"The cell ran longer than the time limit of {limit:.3g} s and was stopped. "
                    "The kernel was restarted, so every variable is gone; run the cells it needs again.",
                )
                err["timed_out"] = True
                return ExecResult("error", [err], time.monotonic() - started, restarted=True)
            except (EOFError, OSError, ValueError) as exc:
                code_ = self._lose(channel)
                return ExecResult("error", [error_output(
                    "KernelDied",
                    f"The kernel process ended while running this cell (exit status {code_}; "
                    f"{exc}). It will restart on the next run with an empty namespace.")],
                    time.monotonic() - started, restarted=True)
            duration = time.monotonic() - started
        status: Literal["success", "error"] = "success" if reply.get("status") == "success" else "error"
        outputs = cast(list[Output], reply.get("outputs") or [])
        return ExecResult(status, outputs, duration)

    def _lose(self, channel: _Channel) -> int | None:
        if self._channel is channel:
            self._channel = None
        return channel.kill()

    async def restart(self) -> None:
        """Throw the namespace away and start a fresh child."""
        async with self._lock:
            if self._channel is not None:
                self._lose(self._channel)
            await self._ensure_started()

    async def aclose(self) -> None:
        """Stop the child. Safe to call twice; a later run would start a new one."""
        channel, self._channel = self._channel, None
        if channel is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(channel.kill)
