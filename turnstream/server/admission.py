"""Admission of new turns: a concurrency limit steered by the event loop's lag and CPU.

A server process drives all its turns on one event loop, on one core. While the loop keeps
up, a turn starts the moment it is asked for. Past what the core can carry, admitting every
turn anyway slows every stream at once: each event waits behind the work of all the others,
and a user watching an answer sees it stutter. The gate keeps the running streams on time
instead, and makes the overflow wait before it starts:

* at most ``limit`` admitted turns run at once (100 to begin with); a turn past the limit
  waits in line (first come, first served) and starts when one ends, at most
  ``limit / PACE`` per tick;
* a watcher measures, every ``interval``, the loop's lag (how late its timer fires) and the
  share of a core the process used. It cuts the limit by a fifth, at most once per
  ``WINDOW`` ticks, when the lag stays over ``max_lag`` (two late ticks in a window) while
  turns wait and the admitted ones fill the limit; it grows the limit, after a whole window
  on time and under ``BUSY_GROW`` of a core, by an eighth (a mostly idle core) or a 25th,
  and only while turns wait for it;
* admission is a promise kept either way: a turn starts within ``max_wait`` seconds
  (``TURNSTREAM_ADMIT_WAIT_S``, 2 s), or it is refused at once (``Overloaded``: ``503`` with
  ``Retry-After``, before anything is stored), so a load balancer can send it to another
  process and a client knows. A turn waits in line at most ``patience`` seconds
  (``START_SHARE`` of the wait): the promise is the turn's first event, and opening the turn
  (its row, its first frame through a busy loop and a load balancer) needs the rest (a start
  at the full 2 s put the first event at 2.06-2.13 s in the cluster's overload test). The
  line is as long as the places free under the limit (a burst waits only for the pacing)
  plus half the turns that ended in the last ``patience`` seconds (at least ``MIN_LINE``):
  about as many places free up in half that time, so a turn let into the line starts in time
  even where the loop runs late (a full ``patience``'s worth let the p99 of a node flooded
  past its cap reach 2.4 s). One
  that did not get a place by then anyway (turns ended more slowly than before) starts,
  past the limit: the limit is a soft bound on load, the wait a promise to a user.

Why it is shaped so, from the server bench at 1,000 concurrent turns (docs/performance.md):
a turn let in now loads the loop over its whole life, so the lag shows an admission a
second or two late. Gating each admission on the current lag let turns in by the hundred
before their load showed (p50 per event swinging between 5 and 100 ms); a limit grown by
one per tick on lag alone overshot by a third; a cohort of turns that started together ends
together, and starting all their successors at once made a burst of its own. Bounding what
runs, growing on CPU use (which rises at once), and pacing starts keep p99 per event near
20 ms where the ungated server gave 150-210 ms.

The watcher runs only while admitted turns run or wait; an idle server does not wake up for
it. ``max_lag <= 0`` turns the gate off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque

from ..errors import Overloaded

log = logging.getLogger("turnstream.server.admission")

IDLE_TICKS = 100
"""Ticks with nothing running or waiting after which the watcher stops."""
WINDOW = 10
"""Ticks per decision window: the limit moves at most once per window."""
MIN_LIMIT = 4
BUSY_GROW = 0.7
"""The limit grows only while the process used less than this share of a core over the
window: CPU use rises as soon as turns are let in, long before the loop's lag shows it, so
it stops the growth before the lag would (growing on lag alone overshot)."""
MAX_RETRY_AFTER = 30
"""The longest ``Retry-After`` a refusal names."""
MIN_LINE = 4
"""The line is never shorter than this (a server whose turns have not ended yet)."""
PACE = 50
"""At most limit / PACE turns start per tick: when a cohort of turns that started together
ends together, their successors start spread over about PACE ticks instead of at once (a
turn's start, with its first provider request, is its most expensive moment)."""
START_SHARE = 0.75
"""A waiting turn whose place has not come starts after this share of ``max_wait``: the rest
is left for it to open and send its first event, which is what the wait promises."""


class Admission:
    def __init__(self, *, max_lag: float = 0.010, interval: float = 0.01, max_wait: float = 2.0,
                 limit: int = 100, min_line: int = MIN_LINE) -> None:
        self.max_lag = max_lag
        self.interval = interval
        self.max_wait = max_wait
        self.patience = max_wait * START_SHARE
        """How long a turn waits in line for a place before it starts anyway."""
        self.min_line = min_line
        self.limit = limit
        """Admitted turns that may run at once (moves with the lag)."""
        self.running = 0
        self.lag = 0.0
        """The loop's lag at the last tick, in seconds."""
        self.admitted = 0
        self.refused = 0
        self.forced = 0
        """Turns started past the limit because their wait ran out."""
        self._ended: deque[float] = deque()
        """When admitted turns ended, over the last ``patience`` seconds."""
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._watcher: asyncio.Task[None] | None = None
        self._ticks = 0
        self._cut_at = -WINDOW
        self._budget = max(1, limit // PACE)
        self._window_max = 0.0
        self._window_busy = 0.0
        self._late = 0

    @property
    def enabled(self) -> bool:
        return self.max_lag > 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def admit(self) -> None:
        """Return when a new turn may start (call ``release()`` when it ends), within
        ``max_wait`` seconds; raise ``Overloaded`` at once when the line is full."""
        if not self.enabled:
            return
        self._watch()
        if not self._waiting and self.running < self.limit and self._budget > 0:
            self._budget -= 1
            self.running += 1
            self.admitted += 1
            return
        if len(self._waiting) >= self.line():
            self.refused += 1
            raise Overloaded(self.retry_after())
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.patience)
        except TimeoutError:
            if not fut.done():  # its promise is due: it starts now, past the limit
                fut.set_result(None)
                self.running += 1
                self.admitted += 1
                self.forced += 1
        except BaseException:
            if fut.done() and not fut.cancelled():  # let in, but its request is gone: free the slot
                self.release()
            else:
                fut.cancel()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiting.remove(fut)  # still there when cancelled or timed out

    def line(self) -> int:
        """How many turns may wait: the places free under the limit now (a burst waits only
        for the pacing; negative while turns run past it), plus half as many as ended in the
        last ``patience`` seconds: about that many places free up in half the time a turn may
        wait, so the last in line starts with time to spare on a loop that runs late."""
        ended = self._ended
        horizon = time.monotonic() - self.patience
        while ended and ended[0] < horizon:
            ended.popleft()
        # Turns started past the limit (their wait ran out) take places before anyone in line:
        # they count against the places the ended turns free.
        return max(self.min_line, self.limit - self.running + len(ended) // 2)

    def retry_after(self) -> int:
        """Seconds a refused client should wait: about how long the line takes to clear at
        the rate turns ended lately (1 to ``MAX_RETRY_AFTER``)."""
        ended = len(self._ended)
        if not ended:
            return min(MAX_RETRY_AFTER, max(1, math.ceil(self.max_wait)))
        return min(MAX_RETRY_AFTER, max(1, math.ceil(len(self._waiting) * self.patience / ended)))

    def release(self) -> None:
        """An admitted turn ended (or will not start after all)."""
        if not self.enabled:
            return
        self.running = max(0, self.running - 1)
        now = time.monotonic()
        ended = self._ended
        ended.append(now)
        while ended[0] < now - self.patience:
            ended.popleft()
        self._let_in()

    def _let_in(self) -> None:
        while self._waiting and self.running < self.limit and self._budget > 0:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                self._budget -= 1
                self.running += 1
                self.admitted += 1

    def tick(self, lag: float, busy: float = 0.0) -> None:
        """One measurement: the loop's lag, and the share of a core the process used since the
        last tick (``busy``). Moves the limit, lets waiting turns in."""
        self.lag = lag = max(0.0, lag)
        self._window_max = max(self._window_max, lag)
        self._window_busy += busy
        self._ticks += 1
        # Cut on lag that lasts (two late ticks in a window: one hiccup is not overload), and
        # only while the limit is what holds turns back: turns wait and the admitted ones fill
        # it. Otherwise there is nobody to hold back, or the lag is not the admitted turns'
        # doing (a start-up import, a slow disk, turns waiting only for the pacing).
        self._late += lag > self.max_lag
        if (self._late >= 2 and self._waiting and self.running >= self.limit
                and self._ticks - self._cut_at >= WINDOW):
            self.limit = max(MIN_LIMIT, self.limit - max(1, self.limit // 5))
            self._cut_at = self._ticks
        if self._ticks % WINDOW == 0:
            busy, self._window_busy = self._window_busy / WINDOW, 0.0
            calm = self._window_max < self.max_lag and self._ticks - self._cut_at >= WINDOW
            if calm and busy < BUSY_GROW and self._waiting and self.running >= self.limit:
                self.limit += max(1, self.limit // (8 if busy < BUSY_GROW / 2 else 25))
            self._window_max = 0.0
            self._late = 0
        self._budget = max(1, self.limit // PACE)
        self._let_in()

    def _watch(self) -> None:
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        idle = 0
        try:
            cpu, wall = time.process_time(), loop.time()
            while idle < IDLE_TICKS:
                due = loop.time() + self.interval
                await asyncio.sleep(self.interval)
                idle = 0 if self.running or self._waiting else idle + 1
                now, now_cpu = loop.time(), time.process_time()
                busy = (now_cpu - cpu) / max(now - wall, 1e-3)
                cpu, wall = now_cpu, now
                try:
                    self.tick(now - due, busy)
                except Exception:  # a bug here must not stop admissions for good
                    log.exception("admission tick failed")
        finally:
            self._watcher = None
            self.lag = 0.0
            self._budget = max(1, self.limit // PACE)

    async def aclose(self) -> None:
        watcher = self._watcher
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
