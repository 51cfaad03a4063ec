"""Following one turn: stored events first, then live ones, with no gap and no duplicate.

The order of operations is what makes it exact:

1. subscribe to the turn on the bus (from now on every published event is queued);
2. read the store for events after the client's last ``n`` and send them;
3. send queued events, dropping every one whose ``n`` was already sent.

A persisted event is written before it is published, so an event published before step 1
is in the store by step 2; one published after step 1 is in the queue. Deltas are never
stored: a client that reconnects gets the finished blocks (``block_stop``) instead of the
deltas it missed. A ``Wake`` (an event too large for a notification from another process),
a ping tick and the end of a pause all send the client back to the store for what it lacks,
so a lost notification costs latency, never an event.

A stopping server ends every stream with ``RECONNECT`` (see there).

The stream ends after the first ``turn_complete`` it sends, whatever its status: a turn
that paused for the client ends a stream; the continuation is followed from that event's
id. A turn that ended without ``turn_complete`` (interrupted by a crash) gets one made up
from its stored state (``lifecycle.completion``), numbered after its last event and not
stored.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from ..bus import Bus, EndOfStream, Envelope, Item, SessionMessage, Subscription
from ..events import BlockDelta, Reconnect, TurnComplete
from ..lifecycle import completion
from ..store import Store

ENDED = ("complete", "failed", "cancelled", "interrupted")

RECONNECT = Envelope.of("", Reconnect(reason="the server is stopping; follow the turn again from the last event "
                                             "id (it goes on elsewhere)"))
"""The last item of a stream ended by a stopping server (``Bus.end_streams``)."""


class Follower:
    def __init__(self, store: Store, bus: Bus, session_id: str, turn_id: str, after: int, *,
                 sub: Subscription | None = None, ping_interval: float = 15.0) -> None:
        self.store = store
        self.session_id = session_id
        self.turn_id = turn_id
        self.last = after
        self.ping_interval = ping_interval
        self._sub = sub if sub is not None else bus.subscribe_turn(turn_id, session_id)
        self._from_first = sub is not None and after == 0
        """The subscription was attached before the turn's first event: the store has nothing more."""
        self.finished = False

    def close(self) -> None:
        self._sub.close()

    async def _from_store(self) -> list[Envelope]:
        out: list[Envelope] = []
        for ev in await self.store.events_after(self.turn_id, self.last):
            out.append(Envelope.stored(self.session_id, ev))
            if ev.name == TurnComplete.name:
                break
        return out

    async def _ended_without_event(self) -> Envelope | None:
        """A made-up ``turn_complete`` for a turn that ended without writing one."""
        turn = await self.store.get_turn(self.turn_id)
        if turn is None or turn.status not in ENDED:
            return None
        if await self.store.events_after(self.turn_id, self.last):
            return None  # it did write more: the caller reads it
        return Envelope.of(self.session_id, completion(turn, self.last + 1))

    def _take(self, env: Envelope) -> bool:
        """True when ``env`` is new (and records it as sent)."""
        if env.n <= self.last:
            return False
        self.last = env.n
        if env.name == TurnComplete.name:
            self.finished = True
        return True

    async def events(self) -> AsyncIterator[Envelope | None]:
        """Every event after ``after`` in order; None when a ping is due. Ends after
        ``turn_complete``."""
        async with aclosing(self.batches()) as batches:
            async for batch in batches:
                if batch is None:
                    yield None
                else:
                    for env in batch:
                        yield env

    async def batches(self) -> AsyncGenerator[list[Envelope] | None, None]:
        """The same events in batches: each holds what was ready at once (the events
        queued while the listener was busy, or a page read from the store), so that a
        listener sends them in one write. None when a ping is due."""
        try:
            await self._sub.ready()
            if not self._from_first:
                out = [env for env in await self._from_store() if self._take(env)]
                if not self.finished:
                    made_up = await self._ended_without_event()
                    if made_up is not None:
                        self._take(made_up)
                        out.append(made_up)
                        self.finished = True
                if out:
                    yield out
            while not self.finished:
                item = await self._sub.get(self.ping_interval)
                out = []
                while True:
                    if item is None:
                        if out:
                            yield out
                            out = []
                        yield None
                    await self._handle(item, out)
                    if self.finished:
                        break
                    item = self._sub.get_nowait()
                    if item is None:
                        break
                if out:
                    yield out
        finally:
            self.close()

    async def _handle(self, item: Item | None, out: list[Envelope]) -> None:
        """Add what ``item`` brings to ``out``: the event itself, or what the store has."""
        if isinstance(item, Envelope):
            if item.n > self.last + 1 and item.name != BlockDelta.name:
                # Something may lie between (e.g. lost while the listener reconnected).
                for env in await self._from_store():
                    if env.n < item.n and self._take(env):
                        out.append(env)
            if self._take(item):
                out.append(item)
            return
        if isinstance(item, SessionMessage):
            return
        if isinstance(item, EndOfStream):
            out.append(RECONNECT)
            self.finished = True
            return
        # A ping tick, a Wake, the end of a pause: back to the store for what is missing.
        for env in await self._from_store():
            if self._take(env):
                out.append(env)
        if not self.finished:
            made_up = await self._ended_without_event()
            if made_up is not None and self._take(made_up):
                out.append(made_up)


__all__ = ["ENDED", "RECONNECT", "Follower"]
