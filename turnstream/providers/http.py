"""What every HTTP adapter shares: the client, opening a streamed POST, mapping errors.

Adapters call ``open_stream`` and get the response's byte chunks; HTTP error statuses and
connection failures become ``ProviderError`` here, classified by the error type in the
body where there is one (PROVIDER-FACTS: classify by the body, not only the status).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, Protocol

import httpx2 as httpx
import orjson

from ..errors import ProviderError, ProviderStatusError, StreamBrokenError
from ..retry import RETRYABLE_ERROR_TYPES, is_hopeless_429, is_retryable_status, parse_retry_after
from ..sse import SSEDecoder
from .base import ProviderEvent

log = logging.getLogger("turnstream.providers")

_SECRET_HEADERS = ("authorization", "x-api-key", "api-key")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA store costs ~20 ms each time."""
    return httpx.create_ssl_context()


def make_client(timeout: float = 600.0) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=200)
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=15.0), limits=limits, verify=_ssl_context())


class ClientPool:
    """The HTTP clients of one provider, each carrying at most ``per_client`` streams at once.

    httpcore's connection pool looks at every one of its connections each time a request
    starts and each time a response closes, so a single client carrying a thousand streams
    pays a thousand checks per request (measured: about a third of the server's CPU at
    N = 1,000). Spreading streams over clients keeps that cost bounded; keep-alive
    connections are still reused within each client.
    """

    def __init__(self, per_client: int = 32, timeout: float = 600.0) -> None:
        self.per_client = per_client
        self.timeout = timeout
        self._clients: list[httpx.AsyncClient] = []
        self._active: list[int] = []

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client for one stream: the least busy one, or a new one when all are full."""
        active = self._active
        i = min(range(len(active)), key=active.__getitem__, default=-1)
        if i < 0 or active[i] >= self.per_client:
            self._clients.append(make_client(self.timeout))
            active.append(0)
            i = len(active) - 1
        active[i] += 1
        try:
            yield self._clients[i]
        finally:
            active[i] -= 1

    async def aclose(self) -> None:
        clients, self._clients, self._active = self._clients, [], []
        for c in clients:
            await c.aclose()


async def drain(chunks: AsyncIterator[bytes], timeout: float = 1.0) -> None:
    """Read what is left of a response after its final event (the end of the chunked body,
    which follows at once), so that the connection goes back to the pool. A response closed
    before its end cannot be reused: every step would open a new connection (and against a
    real API, a new TLS session). A body that does not end within ``timeout`` is closed."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            async for _ in chunks:
                pass


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()}


def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value else default


def _error_from_body(status: int, body: bytes, headers: Any) -> ProviderStatusError:
    message, error_type = body.decode("utf-8", "replace")[:2000] or f"HTTP {status}", None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or message)
            error_type = str(err.get("type") or err.get("code") or "") or None
        elif isinstance(err, str):
            message = err
    retry_after = parse_retry_after(headers)
    retryable = is_retryable_status(status) or (error_type in RETRYABLE_ERROR_TYPES)
    if status == 429 and is_hopeless_429(message, error_type, retry_after):
        retryable = False
    return ProviderStatusError(message, status=status, error_type=error_type, retryable=retryable,
                               retry_after=retry_after)


async def open_stream(pool: ClientPool, url: str, headers: dict[str, str],
                      body: dict[str, Any]) -> AsyncGenerator[bytes, None]:
    """POST ``body`` and yield the response body in chunks as they arrive."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("POST %s headers=%s body=%s", url, redact_headers(headers), orjson.dumps(body).decode()[:20000])
    try:
        headers = {**headers, "accept-encoding": "identity"}
        async with pool.lease() as client, client.stream("POST", url, content=orjson.dumps(body),
                                                         headers=headers) as resp:
            if resp.status_code != 200:
                raw = await resp.aread()
                raise _error_from_body(resp.status_code, raw, resp.headers)
            try:
                # Raw chunks: the request asks for no content coding (``accept-encoding:
                # identity``), so there is nothing to decode, and the decoding layer's per-chunk
                # cost is the largest client cost when a provider trickles small events.
                async for chunk in resp.aiter_raw():
                    yield chunk
            except httpx.HTTPError as exc:
                raise StreamBrokenError(f"the stream broke: {type(exc).__name__}: {exc}",
                                        retryable=True) from exc
    except ProviderError:
        raise
    except httpx.HTTPError as exc:
        # Before any byte of the body arrived: a connection problem, safe to retry.
        raise ProviderError(f"connection failed: {type(exc).__name__}: {exc}", retryable=True,
                            error_type="connection_error") from exc


class SSEParser(Protocol):
    """One API's payload parser: ``parse`` maps one SSE ``data`` to neutral events, ``done``
    turns true at the final event, ``end_of_body`` says what a body that ended means."""

    done: bool

    def parse(self, data: str) -> Sequence[ProviderEvent]: ...

    def end_of_body(self) -> Sequence[ProviderEvent]:
        """Events owed when the body ended (or StreamBrokenError when it ended too early)."""
        ...


class EventStream:
    """Body chunks to neutral events through one parser, with no I/O: what every adapter and
    the recorded-stream tests run."""

    __slots__ = ("decoder", "parser")

    def __init__(self, parser: SSEParser) -> None:
        self.decoder = SSEDecoder()
        self.parser = parser

    def feed(self, chunk: bytes) -> Iterator[ProviderEvent]:
        """The chunk's events, one at a time: those before a bad payload still come out
        before its error is raised, so a failed step keeps what had arrived."""
        parse = self.parser.parse
        for sse in self.decoder.feed(chunk):
            yield from parse(sse.data)

    def finish(self) -> Sequence[ProviderEvent]:
        self.decoder.flush()
        return self.parser.end_of_body()


async def stream_events(pool: ClientPool, url: str, headers: dict[str, str], body: dict[str, Any],
                        parser: SSEParser) -> AsyncGenerator[ProviderEvent, None]:
    """POST ``body`` and yield the neutral events of its SSE response, ending at the final one."""
    events = EventStream(parser)
    async with aclosing(open_stream(pool, url, headers, body)) as chunks:
        async for chunk in chunks:
            for ev in events.feed(chunk):
                yield ev
            if parser.done:
                await drain(chunks)
                return
    for ev in events.finish():
        yield ev
