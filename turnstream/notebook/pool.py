"""``KernelPool``: how many kernels of one manager run at once, and for how long they idle.

* **A cap** (``PoolLimits.max_kernels``): before a kernel starts, ``admit`` counts the live
  ones; at the cap it stops the one used least recently among those not running a cell.
  When every live kernel is running a cell, the start waits for one to finish, until the
  run's deadline.
* **Idle stop** (``PoolLimits.idle_timeout``): a reaper thread stops kernels unused for that
  long. A thread rather than a task, so that the manager needs no task group of its own and
  works under any event loop.

Stopping a kernel only takes its process away: the notebook keeps its cells and outputs,
the kernel's ``generation`` rises at its next start, and the manager then re-runs the
upstream cells a run needs, as after a time-out.

A kernel is *in use* while the manager runs cells in it (``using``); the pool never stops a
kernel in use. Both decisions are made under one lock, and the channel is taken away under
it too, so a run cannot start between the check and the stop.

The pool sees a kernel only as ``PooledKernel`` (whether it is alive, and its process taken
away to be killed), so that this module needs nothing of ``kernel.py``, which calls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from ..aio import shielded
from ..errors import KernelError
from .config import PoolLimits, default_max_kernels

log = logging.getLogger(__name__)


class Killable(Protocol):
    """A kernel's process, taken away from its kernel: the pool kills it (in a thread)."""

    def kill(self) -> int | None: ...


class PooledKernel(Protocol):
    """What the pool needs of a kernel (``kernel.Kernel`` is one)."""

    @property
    def alive(self) -> bool: ...

    def detach(self) -> Killable | None:
        """Take the process away (the caller kills it); the next run starts a fresh one."""
        ...


@dataclass(slots=True)
class _Slot:
    last_used: float
    uses: int = 0
    starting: bool = False


class KernelPool:
    """The live kernels of one ``NotebookManager``. Close it with ``close()``."""

    def __init__(self, limits: PoolLimits, memory_bytes: int | None) -> None:
        self.max_kernels = limits.max_kernels or default_max_kernels(memory_bytes)
        self.idle_timeout = limits.idle_timeout
        self._slots: dict[PooledKernel, _Slot] = {}
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Event] = []
        self._closed = threading.Event()
        self._reaper: threading.Thread | None = None
        self.on_stop: Callable[[PooledKernel], None] | None = None
        """Told after the pool stopped a kernel (idle, or to make room), from the reaper thread
        too: the notebook's cells then show what ran as from the previous kernel."""

    def live(self) -> int:
        """Kernels alive or starting."""
        with self._lock:
            return sum(1 for k, s in self._slots.items() if s.starting or k.alive)

    async def admit(self, kernel: PooledKernel, deadline: float) -> None:
        """Make room for ``kernel`` to start, stopping the least recently used idle kernel at
        the cap. KernelError when every live kernel stays busy until ``deadline``."""
        self._start_reaper()
        while True:
            victim: Killable | None = None
            stopped: PooledKernel | None = None
            with self._lock:
                now = time.monotonic()
                others = [k for k, s in self._slots.items() if k is not kernel and (s.starting or k.alive)]
                if len(others) < self.max_kernels:
                    slot = self._slots.setdefault(kernel, _Slot(now))
                    slot.starting, slot.last_used = True, now
                    return
                idle = [k for k in others if not self._slots[k].uses and not self._slots[k].starting]
                if idle:
                    oldest = min(idle, key=lambda k: self._slots[k].last_used)
                    victim = oldest.detach()
                    stopped = oldest
                    log.info("stopping the least recently used kernel to stay within %d", self.max_kernels)
                else:
                    waiter = asyncio.Event()
                    self._waiters.append(waiter)
            if victim is not None:
                await shielded(asyncio.to_thread(victim.kill))
                self._stopped(stopped)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise KernelError(
                    f"All {self.max_kernels} kernels this server runs at once are busy running cells, so this "
                    "notebook's kernel cannot start now. Try again when one finishes (the limit is "
                    "TURNSTREAM_MAX_KERNELS).")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await waiter.wait()

    def admitted(self, kernel: PooledKernel) -> None:
        """``kernel`` started (or failed to): it counts by whether it is alive from now on."""
        with self._lock:
            slot = self._slots.get(kernel)
            if slot is not None:
                slot.starting = False
        self._wake()

    @contextmanager
    def using(self, kernel: PooledKernel) -> Iterator[None]:
        """Hold ``kernel``: the pool does not stop it until the block ends."""
        with self._lock:
            slot = self._slots.setdefault(kernel, _Slot(time.monotonic()))
            slot.uses += 1
        try:
            yield
        finally:
            with self._lock:
                slot.uses -= 1
                slot.last_used = time.monotonic()
            self._wake()

    def forget(self, kernel: PooledKernel) -> None:
        """``kernel`` is closed for good (its notebook was closed)."""
        with self._lock:
            self._slots.pop(kernel, None)
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for w in waiters:
            w.set()

    # idle stop -------------------------------------------------------------------------------
    def _start_reaper(self) -> None:
        if self.idle_timeout is None or self._reaper is not None or self._closed.is_set():
            return
        self._reaper = threading.Thread(target=self._reap, name="turnstream-kernel-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        assert self.idle_timeout is not None
        every = max(0.05, min(self.idle_timeout / 4, 10.0))
        while not self._closed.wait(every):
            self.stop_idle()

    def stop_idle(self) -> int:
        """Stop every kernel unused for ``idle_timeout`` seconds; how many were stopped."""
        if self.idle_timeout is None:
            return 0
        with self._lock:
            now = time.monotonic()
            idle = [k for k, s in self._slots.items()
                    if not s.uses and not s.starting and k.alive and now - s.last_used >= self.idle_timeout]
            channels = [(k, k.detach()) for k in idle]
        for kernel, channel in channels:
            if channel is not None:
                log.info("stopping a kernel idle for %g s", self.idle_timeout)
                channel.kill()
            self._stopped(kernel)
        return len(channels)

    def _stopped(self, kernel: PooledKernel | None) -> None:
        if kernel is not None and self.on_stop is not None:
            try:
                self.on_stop(kernel)
            except Exception:
                log.exception("the pool's on_stop failed")

    def close(self) -> None:
        self._closed.set()
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join(timeout=15)
