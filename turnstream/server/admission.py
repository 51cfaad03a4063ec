"""Admission of new turns: a concurrency limit that follows how late the event loop runs.

A server process drives all its turns on one event loop, on one core. While the loop keeps
up, a turn starts the moment it is asked for. Past what the core can carry, admitting every
turn anyway slows every stream at once: each event waits behind the work of all the others,
and a user watching an answer sees it stutter. The gate keeps the running streams on time
instead, and makes the overflow wait before it starts:

* at most ``limit`` admitted turns run at once; a turn past the limit waits in line (first
  come, first served) and starts when one ends;
* a watcher measures the loop's lag (how late a timer set ``interval`` ahead fires) and
  moves the limit: up by one per tick while the limit is what holds turns back and the lag
  is under half of ``max_lag``; down by a fifth, at most once per ``CUT_EVERY`` ticks, while
  the lag is over ``max_lag`` (additive increase, multiplicative decrease: the limit settles
  near what the core carries, whatever a turn costs);
* a turn that has waited ``max_wait`` seconds is refused (``Overloaded``: ``503`` with
  ``Retry-After``), so a client never hangs on a server that cannot take it.

Why a limit on running turns rather than on the rate of admissions: a turn admitted now
loads the loop for its whole life (every step, every event), long after the lag that let it
in was measured. Gating on the lag alone let turns in by the hundred before their load
showed, and the latency swung (measured: p50 per event moving between 5 and 100 ms in
half-second windows at 1,000 turns). Bounding what runs bounds the load itself.

The watcher runs only while admitted turns run or wait; an idle server does not wake up for
it. ``max_lag <= 0`` turns the gate off. Measured effect in docs/performance.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque

IDLE_TICKS = 100
"""Ticks with nothing running or waiting after which the watcher stops."""
CUT_EVERY = 10
"""Ticks between two cuts of the limit: one burst of lag cuts it once, not once per tick."""
MIN_LIMIT = 4


class Overloaded(Exception):
    """The turn waited ``max_wait`` seconds without being admitted."""

    def __init__(self, waited: float, retry_after: int) -> None:
        super().__init__(f"the server is at capacity: the turn waited {waited:.0f} s without starting; "
                         f"try again in {retry_after} s")
        self.retry_after = retry_after


class Admission:
    def __init__(self, *, max_lag: float = 0.015, interval: float = 0.01, max_wait: float = 60.0,
                 limit: int = 32) -> None:
        self.max_lag = max_lag
        self.interval = interval
        self.max_wait = max_wait
        self.limit = limit
        """Admitted turns that may run at once (moves with the lag)."""
        self.running = 0
        self.lag = 0.0
        """The loop's lag at the last tick, in seconds."""
        self.admitted = 0
        self.refused = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._watcher: asyncio.Task[None] | None = None
        self._since_cut = CUT_EVERY

    @property
    def enabled(self) -> bool:
        return self.max_lag > 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def admit(self) -> None:
        """Return when a new turn may start (call ``release()`` when it ends); raise
        ``Overloaded`` after ``max_wait``."""
        if not self.enabled:
            return
        self._watch()
        if not self._waiting and self.running < self.limit:
            self.running += 1
            self.admitted += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        started = time.monotonic()
        try:
            await asyncio.wait_for(fut, self.max_wait)
        except TimeoutError:
            self.refused += 1
            raise Overloaded(time.monotonic() - started, max(1, math.ceil(self.max_wait / 4))) from None
        except BaseException:
            if fut.done() and not fut.cancelled():  # let in, but its request is gone: free the slot
                self.release()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiting.remove(fut)  # still there when cancelled or timed out

    def release(self) -> None:
        """An admitted turn ended (or will not start after all)."""
        if not self.enabled:
            return
        self.running = max(0, self.running - 1)
        self._let_in()

    def _let_in(self) -> None:
        while self._waiting and self.running < self.limit:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                self.running += 1
                self.admitted += 1

    def tick(self, lag: float) -> None:
        """One measurement of the loop's lag: move the limit, let waiting turns in."""
        self.lag = lag = max(0.0, lag)
        self._since_cut += 1
        if lag > self.max_lag:
            if self._since_cut >= CUT_EVERY:
                self.limit = max(MIN_LIMIT, self.limit - max(1, self.limit // 5))
                self._since_cut = 0
        elif lag < self.max_lag / 2 and self.running >= self.limit and self._waiting:
            self.limit += 1
        self._let_in()

    def _watch(self) -> None:
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        idle = 0
        try:
            while idle < IDLE_TICKS:
                due = loop.time() + self.interval
                await asyncio.sleep(self.interval)
                idle = 0 if self.running or self._waiting else idle + 1
                self.tick(loop.time() - due)
        finally:
            self._watcher = None
            self.lag = 0.0

    async def aclose(self) -> None:
        watcher = self._watcher
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
