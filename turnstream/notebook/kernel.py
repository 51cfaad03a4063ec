"""A notebook's kernel: one sandboxed child Python process, one namespace, limits.

The child (``child.py``) speaks JSON lines over its stdin/stdout; ``launch.py`` starts it
(behind bubblewrap, in its own cgroup) and stops its whole process tree. The parent side
blocks in a worker thread on ``select`` with the run's deadline, so the kernel works under
any event loop and across loops. When a run passes its time limit, or the caller is
cancelled, the tree is killed; the next run starts a fresh child (``generation`` goes up and
every variable is gone). A reply larger than ``KernelLimits.output_bytes`` is not read: the
kernel is killed instead, so a cell cannot fill the server's memory. A cell can write to the
protocol pipe itself, so every line is checked (``replies.py``) before it is used; one that
fails ends its request as an error and the kernel is killed, like a kernel that died.

``interrupt()`` asks the child to stop the run in progress (a ``KeyboardInterrupt`` in the
cell; the namespace survives, unless the interrupt stopped an import halfway: the child names
the module and the kernel is restarted, see ``child.half_imported``); ``kill_run()`` is the
fallback for a cell that does not stop: the tree is killed and the run ends as interrupted,
with the kernel restarted.

A ``KernelPool`` (the manager's) may stop an idle kernel from another thread: it takes the
channel away under ``_state_lock`` and only while nothing uses the kernel.

Why one module of this size: the channel, its locks and the life of the child (start, run,
interrupt, kill, restart) are one state machine; split, each part would reach into the others'
locks.

An unsandboxed kernel with no ``cwd`` of its own gets a private temporary working directory,
removed with the child, as a sandboxed one gets its tmpfs: the data files of the notebook are
written there.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import select
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..aio import shielded
from ..errors import KernelError, KernelProtocolError, OutputTooLarge
from .child import human_size
from .config import KernelLimits, SandboxConfig
from .launch import KernelProcess, explain_failure, launch
from .model import Output, error_output
from .pool import KernelPool
from .replies import Reply, decode_ready, decode_reply


@dataclass(slots=True)
class ExecResult:
    status: Literal["success", "error"]
    outputs: list[Output] = field(default_factory=list)
    duration: float = 0.0
    restarted: bool = False
    """The child was lost during this run (time limit, cancel, crash): its namespace is gone."""


def interrupted_output(evalue: str) -> Output:
    """The error output of a run that was interrupted."""
    err = error_output("KeyboardInterrupt", evalue)
    err["interrupted"] = True
    return err


def half_import_note(module: str) -> str:
    """What a cell says when an interrupt stopped the import of ``module`` halfway."""
    return (f"The interrupt landed while the module {module!r} was being imported, which leaves it "
            "half-imported: importing it again in the same kernel fails. So the kernel was restarted (the "
            "cure for a half-imported module) and every variable is gone; run the cells it needs again.")


class _Channel:
    """The parent's end of one child's pipes. Closed by whoever finishes last with it."""

    def __init__(self, process: KernelProcess, max_line: int, workdir: str | None = None) -> None:
        proc = process.proc
        assert proc.stdin is not None and proc.stdout is not None
        self.process = process
        self.proc = proc
        self.max_line = max_line
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._busy = False
        self._closing = False
        self.workdir = workdir
        """A private working directory this channel's child had (removed with it)."""

    def send(self, msg: dict[str, Any]) -> None:
        """Write one message without waiting for a reply (an interrupt). OSError once closed."""
        with self._write_lock:
            self._stdin.write(json.dumps(msg).encode() + b"\n")
            self._stdin.flush()

    def exchange(self, msg: dict[str, Any] | None, deadline: float) -> bytes:
        """Send ``msg`` (if any) and wait for the next line, unchecked. TimeoutError, EOFError,
        OSError, OutputTooLarge."""
        with self._lock:
            if self._closing:
                raise EOFError("kernel channel closed")
            self._busy = True
        try:
            if msg is not None:
                self.send(msg)
            return self._read_line(deadline)
        finally:
            with self._lock:
                self._busy = False
                if self._closing:
                    self._close_files()

    def request(self, msg: dict[str, Any], deadline: float) -> Reply:
        """``exchange`` and check the reply (in the caller's thread: a large one takes a while).
        KernelProtocolError besides ``exchange``'s."""
        return decode_reply(self.exchange(msg, deadline), msg["id"])

    def _read_line(self, deadline: float) -> bytes:
        fd = self._stdout.fileno()
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            if len(self._buf) > self.max_line:
                raise OutputTooLarge(len(self._buf))
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
        """Kill the child's whole tree, reap it, and close the pipes once nobody reads them."""
        code = self.process.kill()
        with self._lock:
            self._closing = True
            if not self._busy:
                self._close_files()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return code

    def _close_files(self) -> None:
        for f in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                f.close()


class Kernel:
    """One child process tree and its namespace. Runs are serialised; start is lazy."""

    def __init__(self, limits: KernelLimits | None = None, *, sandbox: SandboxConfig | None = None,
                 cwd: str | None = None, python: str = sys.executable, pool: KernelPool | None = None) -> None:
        self.limits = limits or KernelLimits()
        self.sandbox = sandbox or SandboxConfig()
        self.cwd = cwd
        """Working directory of an unsandboxed kernel (the sandbox has its own)."""
        self.python = python
        self.pool = pool
        self.generation = 0
        """Rises each time a fresh child starts; a namespace belongs to one generation."""
        self._channel: _Channel | None = None
        self._state_lock = threading.Lock()
        self._lock = asyncio.Lock()
        self._seq = 0
        self._running: int | None = None
        """The id of the run in progress."""
        self._asked: int | None = None
        """The id of the last run ``interrupt`` asked to stop."""
        self._stopping: int | None = None
        """The id of a run ``kill_run`` ended."""
        self.last_start_seconds: float | None = None

    @property
    def pid(self) -> int | None:
        channel = self._channel
        return channel.proc.pid if channel else None

    @property
    def alive(self) -> bool:
        channel = self._channel
        return channel is not None and channel.proc.poll() is None

    async def start(self, deadline: float | None = None) -> None:
        """Start the child if it is not running (waiting for room in the pool until
        ``deadline``, a ``time.monotonic()`` value; by default the start timeout)."""
        async with self._lock:
            await self._ensure_started(deadline or time.monotonic() + self.limits.start_timeout)

    async def _ensure_started(self, deadline: float) -> None:
        if self.alive:
            return
        old = self.detach()
        if old is not None:
            await shielded(asyncio.to_thread(old.kill))
        if self.pool is not None:
            await self.pool.admit(self, deadline)
        try:
            channel = await shielded(asyncio.to_thread(self._spawn))
        finally:
            if self.pool is not None:
                self.pool.admitted(self)
        with self._state_lock:
            self._channel = channel
            self.generation += 1

    def _spawn(self) -> _Channel:
        started = time.monotonic()
        workdir = None
        if self.sandbox.mode == "off" and self.cwd is None:
            workdir = tempfile.mkdtemp(prefix="turnstream-kernel-")
        try:
            process = launch(self.limits, self.sandbox, python=self.python, cwd=self.cwd or workdir)
        except OSError as exc:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            raise KernelError(f"the notebook kernel did not start: {exc}") from exc
        except BaseException:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        channel = _Channel(process, self.limits.output_bytes, workdir)
        try:
            hello = channel.exchange(None, started + self.limits.start_timeout)
        except (TimeoutError, EOFError, OSError, ValueError, OutputTooLarge) as exc:
            channel.kill()
            said = process.stderr_text()
            raise explain_failure(said, self.sandbox) or KernelError(
                f"the notebook kernel did not start: {said or repr(exc)}") from exc
        try:
            decode_ready(hello)
        except KernelProtocolError as exc:
            channel.kill()
            raise KernelError(f"the notebook kernel did not start: {exc}") from exc
        self.last_start_seconds = time.monotonic() - started
        return channel

    def check_start(self) -> float:
        """Start a child and stop it at once (blocking); the seconds it took to say ready.
        KernelError (SandboxUnavailable among them) when none starts."""
        channel = self._spawn()
        channel.kill()
        return self.last_start_seconds or 0.0

    async def execute(self, code: str, language: Literal["python", "sql"] = "python", *,
                      filename: str = "<cell>", result_name: str | None = None,
                      time_limit: float | None = None, load: list[dict[str, str]] | None = None) -> ExecResult:
        """Run one cell (after reading the data files in ``load``, see ``child.py``). Never
        raises for the cell's own failures; KernelError (SandboxUnavailable among them) if no
        child starts. Cancelling it kills the kernel; to stop a run and keep the namespace,
        ``interrupt()`` it instead."""
        limit = self.limits.time_limit if time_limit is None else time_limit
        async with self._lock:
            await self._ensure_started(time.monotonic() + max(limit, self.limits.start_timeout))
            channel = self._channel
            assert channel is not None
            self._seq += 1
            seq = self._running = self._seq
            msg = {"id": seq, "op": "run", "language": language, "code": code,
                   "filename": filename, "result_name": result_name, "load": load or []}
            started = time.monotonic()
            try:
                # On cancel the await ends at once; the thread's read ends when the kernel is killed.
                reply = await asyncio.to_thread(channel.request, msg, started + limit)
            except asyncio.CancelledError:
                await self._lose(channel)
                raise
            except TimeoutError:
                await self._lose(channel)
                err = error_output(
                    "TimeoutError",
                    f"The cell ran longer than the time limit of {limit:.3g} s and was stopped. "
                    "The kernel was restarted, so every variable is gone; run the cells it needs again.",
                )
                err["timed_out"] = True
                return ExecResult("error", [err], time.monotonic() - started, restarted=True)
            except OutputTooLarge:
                await self._lose(channel)
                return ExecResult("error", [error_output(
                    "OutputTooLarge",
                    f"The cell's output passed {human_size(self.limits.output_bytes)}, more than a cell "
                    "may return, so the kernel was stopped and every variable is gone. Show less (a summary, "
                    ".head(), fewer points), or write the data to a file.")],
                    time.monotonic() - started, restarted=True)
            except KernelProtocolError as exc:
                await self._lose(channel)
                return ExecResult("error", [error_output(
                    "KernelProtocolError",
                    f"The kernel sent the server something it does not accept ({exc}); code in a cell may have "
                    "written to the kernel's own channel. The kernel was stopped and every variable is gone; "
                    "run the cells it needs again.")], time.monotonic() - started, restarted=True)
            except (EOFError, OSError, ValueError) as exc:  # ValueError: its pipe was closed meanwhile
                code_ = await self._lose(channel)
                if self._stopping == seq:
                    return ExecResult("error", [interrupted_output(
                        "It did not stop when interrupted, so the kernel was restarted and every variable is "
                        "gone; run the cells it needs again.")], time.monotonic() - started, restarted=True)
                return ExecResult("error", [error_output("KernelDied", self._death_note(channel, code_, exc))],
                                  time.monotonic() - started, restarted=True)
            finally:
                self._running = None
            duration = time.monotonic() - started
            if reply.half_imported is not None:  # a later import of it would fail in this child
                await self._lose(channel)
        if self._asked == seq:
            for out in reply.outputs:
                if out["type"] == "error" and out["ename"] == "KeyboardInterrupt":
                    out["interrupted"] = True
        if reply.half_imported is not None:
            for out in reply.outputs:
                if out["type"] == "error":
                    out["evalue"] = half_import_note(reply.half_imported)
            return ExecResult(reply.status, reply.outputs, duration, restarted=True)
        return ExecResult(reply.status, reply.outputs, duration)

    async def interrupt(self) -> bool:
        """Ask the child to stop the run in progress (a KeyboardInterrupt in the cell). False
        when nothing runs. Returns once the request is written, not when the run ends."""
        channel, seq = self._channel, self._running
        if channel is None or seq is None:
            return False
        self._asked = seq
        try:
            await asyncio.wait_for(asyncio.to_thread(channel.send, {"op": "interrupt", "id": seq}), 1.0)
        except (OSError, ValueError, TimeoutError):
            return False  # the child is gone or does not read: kill_run is what is left
        return True

    async def kill_run(self) -> None:
        """End the run in progress by killing the kernel (it returns as interrupted)."""
        channel, seq = self._channel, self._running
        if channel is None or seq is None:
            return
        self._stopping = seq
        await self._lose(channel)

    async def put_file(self, name: str, data: bytes) -> None:
        """Write a data file into the kernel's working directory (read-only), starting it if needed."""
        await self._request({"op": "put_file", "name": name, "data": base64.b64encode(data).decode()})

    async def remove_file(self, name: str) -> None:
        await self._request({"op": "remove_file", "name": name})

    async def _request(self, msg: dict[str, Any]) -> None:
        async with self._lock:
            await self._ensure_started(time.monotonic() + self.limits.start_timeout)
            channel = self._channel
            assert channel is not None
            self._seq += 1
            try:
                reply = await asyncio.to_thread(channel.request, {**msg, "id": self._seq},
                                                time.monotonic() + self.limits.start_timeout)
            except asyncio.CancelledError:
                await self._lose(channel)
                raise
            except (TimeoutError, EOFError, OSError, ValueError, OutputTooLarge) as exc:  # KernelProtocolError too
                await self._lose(channel)
                raise KernelError(f"the kernel failed on {msg['op']}: {exc!r}") from exc
        if reply.status != "success":
            why = next((o["evalue"] for o in reply.outputs if o["type"] == "error"), "no reason given")
            raise KernelError(f"the kernel could not {msg['op']} {msg.get('name')}: {why}")

    def _death_note(self, channel: _Channel, code: int | None, exc: BaseException) -> str:
        group = channel.process.group
        why = f"exit status {code}; {exc}"
        if group is not None and group.oom_kills():
            why = (f"it used more than its memory limit of {human_size(self.limits.memory_bytes or 0)}, so it "
                   f"was killed; {why}")
        return (f"The kernel process ended while running this cell ({why}). "
                "It will restart on the next run with an empty namespace.")

    def detach(self) -> _Channel | None:
        """Take the channel away (the caller kills it); the next run starts a fresh child."""
        with self._state_lock:
            channel, self._channel = self._channel, None
        return channel

    async def _lose(self, channel: _Channel) -> int | None:
        """Forget ``channel`` and kill its tree (in a thread: removing a cgroup can take a moment)."""
        with self._state_lock:
            if self._channel is channel:
                self._channel = None
        return await shielded(asyncio.to_thread(channel.kill))

    async def restart(self) -> None:
        """Throw the namespace away and start a fresh child."""
        async with self._lock:
            channel = self.detach()
            if channel is not None:
                await shielded(asyncio.to_thread(channel.kill))
            await self._ensure_started(time.monotonic() + self.limits.start_timeout)

    async def aclose(self) -> None:
        """Stop the child's whole tree. Safe to call twice; a later run would start a new one."""
        channel = self.detach()
        if channel is not None:
            await shielded(asyncio.to_thread(channel.kill))



