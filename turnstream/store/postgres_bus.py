"""The bus across processes: ``PostgresBus`` adds PostgreSQL ``LISTEN/NOTIFY`` to the
in-process ``Bus``, so that several server processes on one database see each other's events
and control messages (cancel a turn that runs elsewhere), at a cost that follows what is
followed rather than what runs.

Channels. Each session has a channel of its own (``session_channel``: a hash of its id, since
channel names are identifiers of at most 63 bytes). A process ``LISTEN``s to it while a
subscription here follows the session (``Bus._follow``), and ``UNLISTEN``s when the last one
goes. One shared channel, ``CHANNEL``, carries what every process must hear: control messages
(cancel, interrupt a cell) and *interest*.

Interest. A process publishes a session's events only when another process follows that
session: on its first follower a process announces ``{"k": "i", "s": [...]}`` on the shared
channel (and again every ``RENEW_S`` seconds, so interest of a process that died expires
after ``INTEREST_TTL_S``), on its last ``{"k": "u"}``; a process that starts says hello and
the others announce what they follow. A turn nobody follows elsewhere therefore costs no
notification at all. A publisher that gains a follower for a session it published to lately
sends a wake-up for it: whatever it published before it knew is in the store by then, and the
follower reads it there.

Batches. What one session's channel should carry is gathered for ``window`` seconds after the
first item (10 ms: an event of a streaming turn waits at most that long to reach another
process) and sent as one notification holding a JSON array, split to stay under PostgreSQL's
8,000-byte payload limit; an item that does not fit alone is replaced by a wake-up (the
receiver reads the store). Every notification of a window leaves in one round trip
(``pg_notify`` over ``unnest``), in publish order. A notification starts with the sender's
origin, so a process drops its own without parsing them.

When the listening connection breaks it is reopened, every followed channel listened to again
and every subscription woken (it reads the store for what it missed).

Why one module of this size: following, interest, batching and the two connections are one
protocol between processes; split, each half would have to know the other's message kinds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ..bus import Bus, Envelope, SessionMessage, Wake
from .pg import close, connect

if TYPE_CHECKING:
    from .pg import Conn

log = logging.getLogger("turnstream.bus")

CHANNEL = "turnstream"
"""The channel every process listens to: control messages and interest."""
_MAX_PAYLOAD = 7900  # PostgreSQL refuses NOTIFY payloads of 8000 bytes and more
_ORIGIN_LEN = 12
RENEW_S = 10.0
"""How often a process repeats which sessions it follows."""
INTEREST_TTL_S = 35.0
"""Interest not repeated for this long is forgotten (its process is gone)."""
WINDOW_S = 0.010
_NOTIFY = "SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(c, p, i) ORDER BY i"


def session_channel(session_id: str) -> str:
    return "ts_" + hashlib.blake2b(session_id.encode(), digest_size=12).hexdigest()


@dataclass(slots=True)
class BusStats:
    """What the bus did since the process started (``GET /healthz``, the cluster bench)."""

    notifications_sent: int = 0
    events_sent: int = 0
    notifications_received: int = 0
    events_received: int = 0
    own_dropped: int = 0
    """Notifications of this process that came back on a channel it listens to."""


class PostgresBus(Bus):
    """``Bus`` plus LISTEN/NOTIFY, a channel per followed session (see the module doc).

    One connection listens (and runs every ``LISTEN``/``UNLISTEN``, in one task); another
    sends, from one task that drains what the window gathered, so that this process's
    notifications leave in publish order (and therefore in ``n`` order per turn)."""

    def __init__(self, url: str, *, window: float = WINDOW_S) -> None:
        super().__init__()
        self.url = url
        self.window = window
        self.origin = uuid.uuid4().hex[:_ORIGIN_LEN]
        self.counts = BusStats()
        self._tasks: list[asyncio.Task[None]] = []
        self._listening = asyncio.Event()
        # incoming: the listener task's queue of notifications and LISTEN changes
        self._inbox: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        self._channels: dict[str, str] = {}
        """Channel -> session, for the sessions listened to now (on the current connection)."""
        self._setting_up: dict[str, asyncio.Future[None]] = {}
        """Per session being set up: done once it is listened to and announced."""
        # outgoing
        self._pending: dict[str, list[bytes]] = {}
        """Per session channel, the items gathered in the current window."""
        self._control: list[bytes] = []
        self._sent: list[asyncio.Future[None]] = []
        """Resolved when what is gathered now has been sent."""
        self._wakeup = asyncio.Event()
        # what others follow, and what we published lately
        self._interest: dict[str, dict[str, float]] = {}
        """Session -> {origin of a process that follows it: when that expires}."""
        self._published: dict[str, str] = {}
        """Session -> the last turn published here, since the last renewal (and before it)."""
        self._published_before: dict[str, str] = {}

    @property
    def shared(self) -> bool:
        return True

    def stats(self) -> dict[str, int]:
        return dataclasses.asdict(self.counts)

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen(), name="bus-listen"),
                       asyncio.create_task(self._send(), name="bus-send"),
                       asyncio.create_task(self._renew(), name="bus-renew")]
        # Published events must not be lost between start-up and the first LISTEN.
        await asyncio.wait_for(self._listening.wait(), 15)

    async def aclose(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for fut in self._setting_up.values():
            if not fut.done():
                fut.cancel()

    # following ---------------------------------------------------------------------------
    def _follow(self, session_id: str) -> None:
        if session_channel(session_id) in self._channels:
            return  # still listened to (its last follower went a moment ago)
        if session_id not in self._setting_up:
            self._setting_up[session_id] = asyncio.get_running_loop().create_future()
        self._inbox.put_nowait(None)  # the listener task reconciles what it listens to

    def _unfollow(self, session_id: str) -> None:
        self._inbox.put_nowait(None)

    async def _ready(self, session_id: str) -> None:
        fut = self._setting_up.get(session_id)
        if fut is not None and not fut.done():
            # shielded: one waiter giving up (a client that left) must not cancel it for all
            await asyncio.shield(fut)

    # outgoing ----------------------------------------------------------------------------
    def _gather(self, channel: str, item: bytes) -> None:
        self._pending.setdefault(channel, []).append(item)
        self._wakeup.set()

    def _announce(self, doc: dict[str, Any]) -> None:
        doc["o"] = self.origin
        self._control.append(orjson.dumps(doc))
        self._wakeup.set()

    def _forward_event(self, env: Envelope) -> None:
        session = env.session_id
        self._published[session] = env.turn_id
        if session not in self._interest:
            return
        item = orjson.dumps({"t": env.turn_id, "n": env.n, "e": env.name, "d": orjson.Fragment(env.json)})
        if len(item) > _MAX_PAYLOAD - 64:
            item = orjson.dumps({"w": env.turn_id})
        self.counts.events_sent += 1
        self._gather(session_channel(session), item)

    def _forward_message(self, msg: SessionMessage, fallback: dict[str, Any] | None) -> None:
        if msg.session_id not in self._interest:
            return
        item = orjson.dumps({"m": msg.data})
        if len(item) > _MAX_PAYLOAD - 64:
            item = orjson.dumps({"m": fallback}) if fallback is not None else b""
            if not item or len(item) > _MAX_PAYLOAD - 64:
                log.warning("bus: a message of session %s is too large for other processes", msg.session_id)
                return
        self._gather(session_channel(msg.session_id), item)

    async def control(self, action: str, turn_id: str) -> None:
        self._announce({"k": "c", "a": action, "t": turn_id})

    def _batch(self) -> tuple[list[str], list[str], list[asyncio.Future[None]]]:
        """What the window gathered, as (channels, payloads) for one round trip."""
        channels: list[str] = []
        payloads: list[str] = []
        origin = self.origin.encode()
        for doc in self._control:
            channels.append(CHANNEL)
            payloads.append(doc.decode())
        for channel, items in self._pending.items():
            part: list[bytes] = []
            size = 0
            for item in items:
                if part and size + len(item) + 1 > _MAX_PAYLOAD - _ORIGIN_LEN - 2:
                    channels.append(channel)
                    payloads.append((origin + b"[" + b",".join(part) + b"]").decode())
                    part, size = [], 0
                part.append(item)
                size += len(item) + 1
            if part:
                channels.append(channel)
                payloads.append((origin + b"[" + b",".join(part) + b"]").decode())
        self._control = []
        self._pending = {}
        sent, self._sent = self._sent, []
        return channels, payloads, sent

    async def _send(self) -> None:
        retry: tuple[list[str], list[str], list[asyncio.Future[None]]] | None = None
        while True:
            try:
                conn = await connect(self.url)
                try:
                    while True:
                        if retry is None:
                            await self._wakeup.wait()
                            if self.window > 0:
                                await asyncio.sleep(self.window)
                            self._wakeup.clear()
                            retry = self._batch()
                        channels, payloads, sent = retry
                        if channels:
                            await conn.execute(_NOTIFY, channels, payloads)
                            self.counts.notifications_sent += len(channels)
                        retry = None
                        for fut in sent:
                            if not fut.done():
                                fut.set_result(None)
                finally:
                    await close(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("bus: sending notifications failed (%s); reconnecting", exc)
                await asyncio.sleep(0.5)

    async def _flushed(self) -> None:
        """Return once what is gathered now has been sent."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sent.append(fut)
        self._wakeup.set()
        await fut

    async def _renew(self) -> None:
        """Repeat what this process follows; forget interest that expired and old publishers."""
        while True:
            await asyncio.sleep(RENEW_S)
            now = time.monotonic()
            for session, origins in list(self._interest.items()):
                for origin, until in list(origins.items()):
                    if until < now:
                        del origins[origin]
                if not origins:
                    del self._interest[session]
            self._published_before, self._published = self._published, {}
            self._announce_following(list(self._channels.values()))

    def _announce_following(self, sessions: list[str]) -> None:
        """Say that this process follows ``sessions``, in notifications that fit."""
        chunk: list[str] = []
        size = 0
        for s in sessions:
            if chunk and size + len(s) + 4 > _MAX_PAYLOAD - 100:
                self._announce({"k": "i", "s": chunk})
                chunk, size = [], 0
            chunk.append(s)
            size += len(s) + 4
        if chunk:
            self._announce({"k": "i", "s": chunk})

    # incoming ----------------------------------------------------------------------------
    async def _listen(self) -> None:
        first = True
        while True:
            try:
                conn = await connect(self.url)
                try:
                    await self._listen_on(conn, first)
                finally:
                    self._channels = {}
                    await close(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("bus: listening failed (%s); reconnecting", exc)
                await asyncio.sleep(0.5)
            first = False

    async def _listen_on(self, conn: Conn, first: bool) -> None:
        """LISTEN on one connection and handle what arrives, until the connection is lost."""
        inbox = self._inbox
        lost = asyncio.Event()

        def on_notification(_conn: object, _pid: int, channel: str, payload: object) -> None:
            inbox.put_nowait((channel, str(payload)))

        def on_lost(_conn: object) -> None:
            lost.set()
            inbox.put_nowait(None)

        conn.add_termination_listener(on_lost)
        await conn.add_listener(CHANNEL, on_notification)
        await self._reconcile(conn, on_notification)
        self._announce({"k": "h"})  # the others say what they follow
        self._listening.set()
        if not first:  # what was published while we were away is in the store
            for sub in [s for subs in self._subs.values() for s in subs]:
                if sub._remote and sub._key is not None and sub._key[0] == "turn" and sub._session:
                    sub.put(Wake(sub._session, sub._key[1]))
        while True:
            item = await inbox.get()
            if lost.is_set() or conn.is_closed():
                raise ConnectionError("the listening connection was closed")
            if item is None:
                await self._reconcile(conn, on_notification)
                continue
            channel, payload = item
            try:
                if channel == CHANNEL:
                    await self._receive_control(orjson.loads(payload))
                else:
                    self._receive_session(channel, payload)
            except Exception:
                log.exception("bus: a notification could not be handled")

    async def _reconcile(self, conn: Conn, callback: Any) -> None:
        """LISTEN to every followed session not listened to yet, UNLISTEN the others."""
        want = {session_channel(s): s for s in self._followed}
        gone = [c for c in self._channels if c not in want]
        new = [(c, s) for c, s in want.items() if c not in self._channels]
        for channel in gone:
            session = self._channels.pop(channel)
            await conn.remove_listener(channel, callback)
            self._announce({"k": "u", "s": [session]})
        for channel, session in new:
            await conn.add_listener(channel, callback)
            self._channels[channel] = session
        if new:
            self._announce_following([s for _, s in new])
            with contextlib.suppress(TimeoutError):  # the sender reconnects: do not hold listening up
                await asyncio.wait_for(self._flushed(), 5)
        for session in [s for s in self._setting_up if s not in self._followed or session_channel(s) in self._channels]:
            fut = self._setting_up.pop(session)
            if not fut.done():
                fut.set_result(None)

    def _receive_session(self, channel: str, payload: str) -> None:
        if payload.startswith(self.origin):
            self.counts.own_dropped += 1
            return
        session = self._channels.get(channel)
        if session is None:  # UNLISTENed meanwhile
            return
        self.counts.notifications_received += 1
        for doc in orjson.loads(payload[_ORIGIN_LEN:]):
            if "m" in doc:
                self._deliver(SessionMessage(session, doc["m"]))
            elif "w" in doc:
                self._deliver(Wake(session, doc["w"]))
            else:
                self.counts.events_received += 1
                self._deliver(Envelope(session, doc["t"], int(doc["n"]), doc["e"], doc["d"]))

    async def _receive_control(self, doc: dict[str, Any]) -> None:
        origin = doc.get("o")
        if origin == self.origin:
            return
        kind = doc.get("k")
        if kind == "c":
            if self.on_control is not None:
                await self.on_control(str(doc["a"]), str(doc["t"]))
        elif kind == "i":
            until = time.monotonic() + INTEREST_TTL_S
            for session in doc["s"]:
                origins = self._interest.setdefault(str(session), {})
                new = origin not in origins
                origins[str(origin)] = until
                turn = self._published.get(session) or self._published_before.get(session)
                if new and turn is not None:
                    # published here before this follower was known: it reads the store
                    self._gather(session_channel(session), orjson.dumps({"w": turn}))
        elif kind == "u":
            for session in doc["s"]:
                following = self._interest.get(str(session))
                if following is not None:
                    following.pop(str(origin), None)
                    if not following:
                        del self._interest[str(session)]
        elif kind == "h":
            self._announce_following(list(self._channels.values()))


__all__ = ["CHANNEL", "BusStats", "PostgresBus", "session_channel"]
