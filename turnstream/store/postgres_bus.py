"""The bus across processes: ``PostgresBus`` adds PostgreSQL ``LISTEN/NOTIFY`` to the
in-process ``Bus``, so that several server processes on one database see each other's events
and control messages (cancel a turn that runs elsewhere). A notification carries the event
when it fits in PostgreSQL's payload limit, else only a wake-up: the receiver then reads the
store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from ..bus import Bus, Envelope, SessionMessage, Wake
from .pg import close, connect

if TYPE_CHECKING:
    from .pg import Conn

log = logging.getLogger("turnstream.bus")

CHANNEL = "turnstream"
_MAX_PAYLOAD = 7900  # PostgreSQL refuses NOTIFY payloads of 8000 bytes and more


class PostgresBus(Bus):
    """``Bus`` plus LISTEN/NOTIFY on one channel, for several processes on one database.

    One connection listens; another sends, from one task draining a queue, so that this
    process's notifications leave in publish order (and therefore in ``n`` order per turn).
    A process ignores its own notifications. When the listening connection breaks it is
    reopened; listeners recover what they missed from the store on their next poll.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.origin = uuid.uuid4().hex[:12]
        self._outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._listening = asyncio.Event()

    @property
    def shared(self) -> bool:
        return True

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen(), name="bus-listen"),
                       asyncio.create_task(self._send(), name="bus-send")]
        # Published events must not be lost between start-up and the first LISTEN.
        await asyncio.wait_for(self._listening.wait(), 15)

    async def aclose(self) -> None:
        self._outbox.put_nowait(None)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    # outgoing ----------------------------------------------------------------------------
    def _enqueue(self, payload: dict[str, Any]) -> None:
        payload["o"] = self.origin
        self._outbox.put_nowait(orjson.dumps(payload))

    def _forward_event(self, env: Envelope) -> None:
        payload = orjson.dumps({"k": "e", "s": env.session_id, "t": env.turn_id, "n": env.n, "e": env.name,
                                "d": orjson.Fragment(env.json), "o": self.origin})
        if len(payload) > _MAX_PAYLOAD:
            payload = orjson.dumps({"k": "w", "s": env.session_id, "t": env.turn_id, "o": self.origin})
        self._outbox.put_nowait(payload)

    def _forward_message(self, msg: SessionMessage, fallback: dict[str, Any] | None) -> None:
        payload = orjson.dumps({"k": "m", "s": msg.session_id, "d": msg.data, "o": self.origin})
        if len(payload) > _MAX_PAYLOAD:
            if fallback is None:
                log.warning("bus: a message of session %s is too large for other processes", msg.session_id)
                return
            payload = orjson.dumps({"k": "m", "s": msg.session_id, "d": fallback, "o": self.origin})
            if len(payload) > _MAX_PAYLOAD:
                log.warning("bus: a message of session %s is too large for other processes", msg.session_id)
                return
        self._outbox.put_nowait(payload)

    async def control(self, action: str, turn_id: str) -> None:
        self._enqueue({"k": "c", "a": action, "t": turn_id})

    async def _send(self) -> None:
        while True:
            try:
                conn = await connect(self.url)
                try:
                    while True:
                        payload = await self._outbox.get()
                        if payload is None:
                            return
                        try:
                            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, payload.decode())
                        except Exception:
                            if conn.is_closed():  # the connection was lost: resent on the next one
                                self._outbox.put_nowait(payload)
                            raise
                finally:
                    await close(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("bus: sending notifications failed (%s); reconnecting", exc)
                await asyncio.sleep(0.5)

    # incoming ----------------------------------------------------------------------------
    async def _listen(self) -> None:
        while True:
            try:
                conn = await connect(self.url)
                try:
                    await self._listen_on(conn)
                finally:
                    await close(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("bus: listening failed (%s); reconnecting", exc)
                await asyncio.sleep(0.5)

    async def _listen_on(self, conn: Conn) -> None:
        """LISTEN on one connection and handle what arrives, until the connection is lost."""
        # asyncpg calls these two from its protocol; the payloads are handled here, one at a
        # time in arrival order, and None (the connection was lost) ends the loop.
        inbox: asyncio.Queue[str | None] = asyncio.Queue()
        conn.add_termination_listener(lambda _conn: inbox.put_nowait(None))
        await conn.add_listener(CHANNEL, lambda _conn, _pid, _channel, payload: inbox.put_nowait(str(payload)))
        self._listening.set()
        while (payload := await inbox.get()) is not None:
            try:
                await self._receive(orjson.loads(payload))
            except Exception:
                log.exception("bus: a notification could not be handled")
        raise ConnectionError("the listening connection was closed")

    async def _receive(self, doc: dict[str, Any]) -> None:
        if doc.get("o") == self.origin:
            return
        kind = doc.get("k")
        if kind == "e":
            self._deliver(Envelope(doc["s"], doc["t"], int(doc["n"]), doc["e"], doc["d"]))
        elif kind == "w":
            self._deliver(Wake(doc["s"], doc["t"]))
        elif kind == "m":
            self._deliver(SessionMessage(doc["s"], doc["d"]))
        elif kind == "c" and self.on_control is not None:
            await self.on_control(str(doc["a"]), str(doc["t"]))


__all__ = ["CHANNEL", "PostgresBus"]
