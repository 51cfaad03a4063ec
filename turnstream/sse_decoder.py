"""An incremental Server-Sent Events decoder: bytes in, (event, data) pairs out, no I/O.

``feed()`` takes any slice of the body (split anywhere, even inside a UTF-8 sequence or
between ``\\r`` and ``\\n``) and returns the events it completed; ``flush()`` ends the body.
Following the SSE spec, an event left unterminated at the end of the body is dropped, as
the official SDKs' decoders do; ``flush()`` reports whether that happened.

Written here rather than taken from a library because the hot path must touch each byte
once with C-speed splits (``bytes.split``), which the general-purpose decoders do not.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SSEEvent:
    event: str
    data: str
    id: str | None = None


class SSEDecoder:
    __slots__ = ("_buf", "_cr_pending", "dropped_tail")

    def __init__(self) -> None:
        self._buf = b""
        self._cr_pending = False
        self.dropped_tail = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        for raw in self._complete(chunk):
            ev = _parse_event(raw)
            if ev is not None:
                out.append(ev)
        return out

    def feed_data(self, chunk: bytes) -> list[str]:
        """``feed``, keeping only each event's data: what a provider's payload parser reads,
        without an ``SSEEvent`` per event (the providers' streams are this decoder's hot path)."""
        out: list[str] = []
        for raw in self._complete(chunk):
            if raw.startswith(b"event: "):
                nl = raw.find(b"\n")
                if nl > 0 and raw.startswith(b"data: ", nl + 1) and raw.find(b"\n", nl + 1) < 0:
                    out.append(raw[nl + 7:].decode("utf-8", "replace"))
                    continue
            elif raw.startswith(b"data: ") and raw.find(b"\n") < 0:
                out.append(raw[6:].decode("utf-8", "replace"))
                continue
            ev = _parse_event(raw)
            if ev is not None:
                out.append(ev.data)
        return out

    def _complete(self, chunk: bytes) -> list[bytes]:
        """The raw events that ``chunk`` completes (line endings made ``\\n``)."""
        if self._cr_pending:
            chunk = b"\r" + chunk
            self._cr_pending = False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                # A lone CR at the end may be the first half of CRLF: decide when more arrives.
                chunk = chunk[:-1]
                self._cr_pending = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + chunk if self._buf else chunk
        if b"\n\n" not in buf:
            self._buf = buf
            return []
        parts = buf.split(b"\n\n")
        self._buf = parts.pop()
        return parts

    def flush(self) -> list[SSEEvent]:
        """End of body. A complete event needs its blank line, so a non-empty tail is dropped."""
        tail = self._buf + (b"\r" if self._cr_pending else b"")
        self._buf = b""
        self._cr_pending = False
        if tail.strip():
            self.dropped_tail = True
        return []


def _parse_event(raw: bytes) -> SSEEvent | None:
    # Fast path for the two shapes providers send: "event: x\ndata: {...}" and "data: {...}".
    if raw.startswith(b"event: "):
        nl = raw.find(b"\n")
        if nl > 0 and raw.startswith(b"data: ", nl + 1) and raw.find(b"\n", nl + 1) < 0:
            return SSEEvent(raw[7:nl].decode("utf-8", "replace"), raw[nl + 7:].decode("utf-8", "replace"))
    elif raw.startswith(b"data: ") and raw.find(b"\n") < 0:
        return SSEEvent("message", raw[6:].decode("utf-8", "replace"))
    event = "message"
    data_lines: list[str] = []
    ev_id: str | None = None
    for line in raw.decode("utf-8", "replace").split("\n"):
        if not line or line[0] == ":":
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            ev_id = value
    if not data_lines:
        return None
    return SSEEvent(event, "\n".join(data_lines), ev_id)
