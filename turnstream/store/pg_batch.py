"""Turn writes on PostgreSQL sent together when they queue: ``WriteBatcher``.

Every write to a turn is one guarded statement (``postgres.py``), and at a few hundred
concurrent turns a process asks for a couple of thousand of them a second. Each costs a round
trip, a pool lease and a commit of its own, and the client's share of that (asyncpg binding
and reading the reply, the lease, the task switches) is most of what a turn spends in the
store. So while ``lanes`` writes are in flight, the writes asked for meanwhile wait, and
the next lane to free up sends all of them as one statement (``statements.append_many``:
the same guarded update for every turn of the batch, then the blocks, ledger rows and
events of the turns whose guard passed).

Nothing is lost in the grouping and nothing waits for company: a write that finds a lane
free goes at once, alone, exactly as before; a write in a batch that its guard refused (or
a batch that failed as a whole: a conflict on the one-open-turn index, a lost connection)
is sent again alone, which raises the refusal it would have raised alone. Writes of one
turn keep their order: one at a time is in flight, the next waits until it is answered. A
write once queued is committed or refused as a whole, even if its caller is
cancelled meanwhile (``aio.shielded``), as a statement once sent is.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Generic, Protocol, TypeVar

from ..aio import shielded


class TurnWrite(Protocol):
    @property
    def turn_id(self) -> str: ...


W = TypeVar("W", bound=TurnWrite)


class WriteBatcher(Generic[W]):
    """Runs writes through ``one`` (a write alone: returns, or raises its refusal) while fewer
    than ``lanes`` are in flight, and the ones that queued meanwhile through ``many`` (several
    writes of distinct turns in one statement: returns the ids of the turns whose write was
    applied)."""

    def __init__(self, one: Callable[[W], Awaitable[None]],
                 many: Callable[[Sequence[W]], Awaitable[Collection[str]]], *, lanes: int) -> None:
        self._one = one
        self._many = many
        self._lanes = max(1, lanes)
        self._busy = 0
        self._queue: list[tuple[W, asyncio.Future[None]]] = []
        self._sending: Counter[str] = Counter()
        """Writes in flight, by turn."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._quiet = asyncio.Event()
        """Set when nothing is in flight or waits (``drain``)."""
        self._quiet.set()
        self.batches = 0
        """Statements sent with more than one write (for tests and benchmarks)."""

    async def write(self, w: W) -> None:
        self._quiet.clear()
        if self._busy < self._lanes and not self._queue and w.turn_id not in self._sending:
            self._busy += 1
            self._sending[w.turn_id] += 1
            try:
                await self._one(w)
            finally:
                self._sent([w])
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((w, fut))
        self._next()
        await shielded(fut)

    def _sent(self, ws: Sequence[W]) -> None:
        """A lane is free again, and ``ws``' turns have one write fewer in flight."""
        self._busy -= 1
        for w in ws:
            self._sending[w.turn_id] -= 1
            if not self._sending[w.turn_id]:
                del self._sending[w.turn_id]
        self._next()
        if not self._busy and not self._queue:
            self._quiet.set()

    def _next(self) -> None:
        """Send what waits, as one batch, if a lane is free: at most one write per turn, and
        none of a turn that has a write in flight (it goes after that one is answered)."""
        if not self._queue or self._busy >= self._lanes:
            return
        batch: list[tuple[W, asyncio.Future[None]]] = []
        later: list[tuple[W, asyncio.Future[None]]] = []
        turns: set[str] = set()
        for item in self._queue:
            tid = item[0].turn_id
            (later if tid in turns or tid in self._sending else batch).append(item)
            turns.add(tid)
        if not batch:
            return
        self._queue = later
        self._busy += 1
        for w, _ in batch:
            self._sending[w.turn_id] += 1
        task = asyncio.get_running_loop().create_task(self._run(batch), name="turnstream-pg-batch")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[W, asyncio.Future[None]]]) -> None:
        try:
            applied: Collection[str] = ()
            if len(batch) > 1:
                self.batches += 1
                try:
                    applied = await self._many([w for w, _ in batch])
                except Exception:  # a conflict, a lost connection: each alone tells its own outcome
                    applied = ()
            for w, fut in batch:
                if w.turn_id in applied:
                    fut.set_result(None)
                    continue
                try:
                    await self._one(w)
                except asyncio.CancelledError:
                    fut.cancel()
                    raise
                except Exception as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(None)
        finally:
            for _, fut in batch:  # cancelled half way (the store closing): nobody waits forever
                if not fut.done():
                    fut.cancel()
            self._sent([w for w, _ in batch])

    async def drain(self) -> None:
        """Until every write asked for has been sent and answered (before the pool closes)."""
        await self._quiet.wait()
