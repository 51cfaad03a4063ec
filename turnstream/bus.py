"""Bus: live fan-out of turn events and session messages to every listener.

The store is the source of truth; the bus only says "this happened" quickly. A listener
that joins late, or misses something, catches up with ``Store.events_after(turn_id, n)``
and drops what it already has by ``n``. That makes the rules for a publisher simple:
publish a persisted event only after the store call that wrote it returned (the runner
does: it persists, then calls ``on_event``).

Three kinds of subscription:

* by turn (``subscribe_turn``): the events of one turn, for an SSE stream;
* by session (``subscribe_session``): the events of every turn of a session plus session
  messages (notebook changes), for the WebSocket;
* session messages only (``subscribe_messages``): beside a turn's subscription, for the
  AI SDK and AG-UI streams that carry notebook changes too.

Every subscription belongs to a session. The bus counts, per session, the subscriptions that
want other processes' events (all but the one a turn's own runner attaches: its events are
published here), and tells a shared bus when that count leaves and returns to zero, so that a
process hears a session's events only while something here follows it (``_follow`` and
``_unfollow``). ``Subscription.ready()`` returns once that is in effect: a follower awaits it
before it reads the store, so nothing published by another process falls between the two.

``Bus`` works inside one process. ``PostgresBus`` (``store/postgres_bus.py``, opened beside
the store by ``store.open_bus``) adds PostgreSQL ``LISTEN/NOTIFY``, a channel per followed
session, so that several server processes on one database see each other's events and
control messages (cancel a turn that runs elsewhere).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .events import StreamEvent, decode

if TYPE_CHECKING:
    from .store.protocol import StoredEvent

log = logging.getLogger("turnstream.bus")



@dataclass(slots=True)
class Envelope:
    """One turn event as listeners see it, whatever process produced it: the SPEC §8 name
    and payload, which the SSE and WebSocket encoders send as they are, and the event object
    (``event()``), which the AI SDK encoder reads. Made from an event with ``of``, from a
    stored record with ``stored``."""

    session_id: str
    turn_id: str
    n: int
    name: str
    data: dict[str, Any]
    _json: bytes | None = field(default=None, repr=False)
    _event: StreamEvent | None = field(default=None, repr=False)

    @property
    def json(self) -> bytes:
        """The data as JSON, encoded once however many listeners send it."""
        if self._json is None:
            self._json = orjson.dumps(self.data)
        return self._json

    @property
    def event_id(self) -> str:
        return f"{self.turn_id}:{self.n}"

    def event(self) -> StreamEvent:
        """The event itself: the one published in this process, else decoded from ``data``
        once (``InvalidValue`` when the data does not fit the name)."""
        if self._event is None:
            self._event = decode(self.name, self.data, turn_id=self.turn_id, n=self.n)
        return self._event

    @classmethod
    def of(cls, session_id: str, ev: StreamEvent) -> Envelope:
        return cls(session_id, ev.turn_id, ev.n, ev.name, ev.data(), _event=ev)

    @classmethod
    def stored(cls, session_id: str, ev: StoredEvent) -> Envelope:
        return cls(session_id, ev.turn_id, ev.n, ev.name, ev.data)


@dataclass(slots=True)
class Wake:
    """Something happened to this turn that did not fit in a notification: read the store."""

    session_id: str
    turn_id: str


@dataclass(slots=True)
class EndOfStream:
    """The server is stopping: a listener ends its stream, telling its client to reconnect
    (the turn goes on, here until the process stops, then wherever it is taken over)."""


@dataclass(slots=True)
class SessionMessage:
    """A session message that is not a turn event (a notebook change)."""

    session_id: str
    data: dict[str, Any]


Item = Envelope | Wake | SessionMessage | EndOfStream
ControlHandler = Callable[[str, str], Awaitable[None]]
"""Called with (action, turn_id) for control messages from other processes."""


class Subscription:
    """A listener's queue. Unbounded: a slow reader costs memory, never a lost event.

    Cheap per item, because every streamed delta passes here: a deque and one waiter
    future, and the ``get`` timeout (the SSE ping interval) is one timer per subscription
    that is re-armed lazily when it fires, not a timer made and cancelled per item."""

    __slots__ = ("_bus", "_closed", "_deadline", "_items", "_key", "_remote", "_session", "_timer", "_waiter")

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._key: tuple[str, str] | None = None
        self._session: str | None = None
        """The session whose events (and messages) this subscription follows."""
        self._remote = False
        """True when it wants other processes' events of the session too."""
        self._closed = False
        self._items: deque[Item] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._deadline = 0.0
        """When the ``get`` now waiting gives up (loop time)."""
        self._timer: asyncio.TimerHandle | None = None

    def put(self, item: Item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> int:
        """Items queued now (``get_nowait`` returns them without waiting)."""
        return len(self._items)

    async def get(self, timeout: float | None = None) -> Item | None:
        """The next item, or None when ``timeout`` seconds pass without one."""
        if self._items:
            return self._items.popleft()
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        if timeout is not None:
            self._deadline = loop.time() + timeout
            if self._timer is None or self._timer.when() > self._deadline:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = loop.call_at(self._deadline, self._expire)
        else:
            self._deadline = float("inf")
        try:
            await waiter
        finally:
            self._waiter = None
        return self._items.popleft() if self._items else None

    def _expire(self) -> None:
        """The timer: wake a ``get`` whose deadline passed, or re-arm for the one waiting now."""
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done() or self._deadline == float("inf"):
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._deadline:
            waiter.set_result(None)
        else:
            self._timer = loop.call_at(self._deadline, self._expire)

    async def ready(self) -> None:
        """Return once events published by other processes reach this subscription."""
        if self._session is not None and self._remote:
            await self._bus._ready(self._session)

    def get_nowait(self) -> Item | None:
        return self._items.popleft() if self._items else None

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._bus._remove(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Bus:
    """In-process fan-out. Publishing never blocks and never fails the publisher."""

    def __init__(self) -> None:
        self._subs: dict[tuple[str, str], set[Subscription]] = {}
        self._followed: dict[str, int] = {}
        """Per session, the subscriptions here that want other processes' events."""
        self.on_control: ControlHandler | None = None

    # subscribing -----------------------------------------------------------------------
    def subscription(self) -> Subscription:
        """A subscription not attached yet (see ``attach``)."""
        return Subscription(self)

    def attach(self, sub: Subscription, kind: str, key: str, session_id: str, *, remote: bool = True) -> None:
        """Start delivering to ``sub``; a subscription closed meanwhile stays closed.
        ``remote=False``: only this process's events are wanted (the subscription of a turn
        whose runner is here)."""
        if sub._closed:
            return
        self._remove(sub)
        sub._key = (kind, key)
        sub._session = session_id
        sub._remote = remote
        self._subs.setdefault(sub._key, set()).add(sub)
        if remote:
            count = self._followed.get(session_id, 0)
            self._followed[session_id] = count + 1
            if count == 0:
                self._follow(session_id)

    def subscribe_turn(self, turn_id: str, session_id: str) -> Subscription:
        sub = Subscription(self)
        self.attach(sub, "turn", turn_id, session_id)
        return sub

    def subscribe_session(self, session_id: str) -> Subscription:
        sub = Subscription(self)
        self.attach(sub, "session", session_id, session_id)
        return sub

    def subscribe_messages(self, session_id: str) -> Subscription:
        """Only the session's messages (notebook changes), none of its turn events: for a
        stream that follows a turn on its own subscription and adds the notebook."""
        sub = Subscription(self)
        self.attach(sub, "messages", session_id, session_id)
        return sub

    def _remove(self, sub: Subscription) -> None:
        if sub._key is None:
            return
        subs = self._subs.get(sub._key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub._key]
        sub._key = None
        session = sub._session
        if sub._remote and session is not None:
            sub._remote = False
            count = self._followed.get(session, 0) - 1
            if count > 0:
                self._followed[session] = count
            else:
                self._followed.pop(session, None)
                self._unfollow(session)


    def end_streams(self) -> None:
        """Tell every listener of this process to end its stream (see ``EndOfStream``)."""
        for subs in list(self._subs.values()):
            for sub in list(subs):
                sub.put(EndOfStream())

    def listeners(self, kind: str, key: str) -> int:
        return len(self._subs.get((kind, key), ()))

    # publishing ------------------------------------------------------------------------
    def publish(self, session_id: str, ev: StreamEvent) -> None:
        """Fan a runner's event out here and, for a shared bus, to the other processes."""
        self.publish_envelope(Envelope.of(session_id, ev))

    def publish_envelope(self, env: Envelope) -> None:
        self._deliver(env)
        self._forward_event(env)

    def publish_message(self, session_id: str, data: dict[str, Any], *,
                        fallback: dict[str, Any] | None = None) -> None:
        """Fan a session message out. ``fallback`` is what other processes get instead when
        ``data`` is too large for a notification (a shared bus drops a message that has no
        fallback, or whose fallback is too large too)."""
        msg = SessionMessage(session_id, data)
        self._deliver(msg)
        self._forward_message(msg, fallback)

    def _deliver(self, item: Envelope | Wake | SessionMessage) -> None:
        if isinstance(item, Envelope | Wake):
            for sub in self._subs.get(("turn", item.turn_id), ()):
                sub.put(item)
            for sub in self._subs.get(("session", item.session_id), ()):
                sub.put(item)
        else:
            for sub in self._subs.get(("session", item.session_id), ()):
                sub.put(item)
            for sub in self._subs.get(("messages", item.session_id), ()):
                sub.put(item)

    async def control(self, action: str, turn_id: str) -> None:
        """Ask the process that runs ``turn_id`` to act on it (only ``cancel`` exists).
        Inside one process the caller has already acted; nothing to forward."""

    # the hooks a shared bus fills in ---------------------------------------------------
    def _follow(self, session_id: str) -> None:
        """The first subscription of the session that wants other processes' events."""

    def _unfollow(self, session_id: str) -> None:
        """The last such subscription of the session went."""

    async def _ready(self, session_id: str) -> None:
        """Return once other processes' events of the session reach this process."""

    def _forward_event(self, env: Envelope) -> None:
        pass

    def _forward_message(self, msg: SessionMessage, fallback: dict[str, Any] | None) -> None:
        pass

    @property
    def shared(self) -> bool:
        """True when other processes may run turns of the same database."""
        return False

    def stats(self) -> dict[str, int] | None:
        """What a shared bus sent and received since start (None for this one)."""
        return None

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


__all__ = ["Bus", "EndOfStream", "Envelope", "SessionMessage", "Subscription", "Wake"]
