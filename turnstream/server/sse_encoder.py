"""The SSE encoding of turn events (SPEC §8) and the streaming response around it.

Each event is three lines and a blank one (the events ready at the same moment go out in
one write)::

    id: <turn_id>:<n>
    event: <name>
    data: <json on one line>

A comment line (``: ping``) goes out when nothing else has for ``ping_interval`` seconds,
so proxies keep the connection open and a dead client is noticed. The stream starts with
``retry:`` so that an ``EventSource`` reconnects quickly, sending ``Last-Event-ID``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from ..bus import Envelope
from ..events import Reconnect

PING = b": ping\n\n"
RETRY = b"retry: 1000\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}


def encode(env: Envelope) -> bytes:
    """One event as SSE bytes. JSON never holds a raw newline, so ``data`` is one line. A
    notice that is not a turn event (``events.Reconnect``) goes without an id, so the
    client's Last-Event-ID stays the last real event's."""
    if env.name == Reconnect.name:
        return b"".join((b"event: ", env.name.encode(), b"\ndata: ", env.json, b"\n\n"))
    return b"".join((b"id: ", env.event_id.encode(), b"\nevent: ", env.name.encode(), b"\ndata: ", env.json,
                     b"\n\n"))


async def encode_stream(batches: AsyncIterator[list[Envelope] | None]) -> AsyncIterator[bytes]:
    """One write per batch (``Follower.batches``): the events that were ready together go
    out together, so a listener that fell behind catches up in one write, not one per event."""
    yield RETRY
    async for batch in batches:
        if batch is None:
            yield PING
        elif len(batch) == 1:
            yield encode(batch[0])
        else:
            yield b"".join([encode(env) for env in batch])


def sse_response(batches: AsyncIterator[list[Envelope] | None], *,
                 headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(encode_stream(batches), media_type="text/event-stream",
                             headers={**HEADERS, **(headers or {})})


LAST_EVENT_ID = r"^([A-Za-z0-9_.:-]{1,200}:)?[0-9]{1,12}$"
"""What a Last-Event-ID can be: ``<turn_id>:<n>``, or a bare ``n``."""


def parse_last_event_id(value: str, turn_id: str) -> int | None:
    """``<turn_id>:<n>`` (or a bare ``n``) to n; None when it is not one of those for this turn."""
    tid, sep, n = value.strip().rpartition(":")
    if sep and tid != turn_id:
        return None
    if not (n.isascii() and n.isdigit()) or len(n) > 12:
        return None
    return int(n)


__all__ = ["LAST_EVENT_ID", "PING", "encode", "parse_last_event_id", "sse_response"]
