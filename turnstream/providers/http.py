"""What every HTTP adapter shares: the client, opening a streamed POST, mapping errors.

Adapters call ``open_stream`` and get the response's byte chunks; HTTP error statuses and
connection failures become ``ProviderError`` here, classified by the error type in the
body where there is one (PROVIDER-FACTS: classify by the body, not only the status).

A ``200`` is not always a stream. A JSON body at 200 (LiteLLM's ``/v1/messages`` answers its
upstream's failure as ``{"type": "error", "error": {…}}``) is read as the error it holds,
retryable by its type. A body that ends without a single SSE event (open-responses-server's
``Not Found`` under ``text/event-stream``; llama-cpp-python's empty body when its handler
fails after the headers went out) is a ``ProviderProtocolError`` carrying the body's first
bytes, not retried: the same request gets the same answer. Both checks cost nothing per
event: one header look-up per response, one flag test per body chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, Protocol

import httpx2 as httpx
import orjson

from ..errors import ProviderError, ProviderProtocolError, ProviderStatusError, StreamBrokenError, UsageError
from ..retry import RETRYABLE_ERROR_TYPES, is_hopeless_429, is_retryable_status, parse_retry_after
from ..sse_decoder import SSEDecoder
from .base import ProviderEvent

log = logging.getLogger("turnstream.providers")

_SECRET_HEADERS = ("authorization", "x-api-key", "api-key")
_SECRET_WORDS = frozenset({"key", "apikey", "auth", "authorization", "token", "secret", "password", "cookie"})
"""A header with one of these among the words of its name (split at ``-`` and ``_``) is logged
as ``***`` too: a gateway's own key (``x-portkey-api-key``), not ``x-portkey-provider``."""
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


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
    return {k: ("***" if k.lower() in _SECRET_HEADERS or _SECRET_WORDS & set(re.split(r"[-_]", k.lower())) else v)
            for k, v in headers.items()}


def custom_headers(variable: str, given: Mapping[str, str] | None = None) -> dict[str, str]:
    """Headers to add to every request: ``given`` (a provider's ``headers=``), else the
    environment variable ``variable`` (``ANTHROPIC_CUSTOM_HEADERS`` or ``OPENAI_CUSTOM_HEADERS``),
    one ``Name: value`` a line (the form Claude Code reads ``ANTHROPIC_CUSTOM_HEADERS`` in).
    Gateways that route by header need them (Portkey's ``x-portkey-provider``). A name that is
    not an HTTP token or a value with a line break is a ``UsageError`` naming where it came from."""
    where = "headers=" if given is not None else variable
    if given is None:
        text = env(variable) or ""
        given = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise UsageError(f"{variable}: each line must be 'Name: value', not {line.strip()[:60]!r}")
            given[name.strip()] = value.strip()
    out: dict[str, str] = {}
    for name, value in given.items():
        if not _HEADER_NAME.fullmatch(name):
            raise UsageError(f"{where}: {name[:60]!r} is not a header name")
        if "\r" in value or "\n" in value:
            raise UsageError(f"{where}: the value of {name} holds a line break")
        out[name.lower()] = value
    return out


def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value else default


def status_of(code: Any) -> int | None:
    """An error ``code`` that is an HTTP status: an int, or a string of three digits (LiteLLM
    sends ``"code": "500"``) from 100 to 599; else None (``"rate_limit_exceeded"``, …)."""
    if isinstance(code, str) and len(code) == 3 and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return code
    return None


def _error_from_body(status: int, body: bytes, headers: Any) -> ProviderStatusError:
    message, error_type, code_status = body.decode("utf-8", "replace")[:2000] or f"HTTP {status}", None, None
    api_code: str | None = None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or message)
            error_type = str(err.get("type") or err.get("code") or "") or None
            code_status = status_of(err.get("code"))
            if code_status is None and err.get("code"):
                api_code = str(err["code"])
        elif isinstance(err, str):
            message = err
    retry_after = parse_retry_after(headers)
    retryable = (is_retryable_status(status) or (error_type in RETRYABLE_ERROR_TYPES)
                 or (code_status is not None and is_retryable_status(code_status)))
    if status == 429 and is_hopeless_429(message, error_type, retry_after):
        retryable = False
    return ProviderStatusError(message, status=status, error_type=error_type, retryable=retryable,
                               retry_after=retry_after, api_code=api_code)


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
            if "json" in resp.headers.get("content-type", ""):
                raise _json_instead_of_stream(await resp.aread(), resp.headers)
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


def _json_instead_of_stream(body: bytes, headers: Any) -> ProviderError:
    """A 200 whose body is JSON: the error object it holds, or else a protocol error."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and doc.get("error"):
        return _error_from_body(200, body, headers)
    return ProviderProtocolError(f"the server answered HTTP 200 with a JSON body instead of an event stream "
                                 f"(is \"stream\": true ignored?): {body[:HEAD_BYTES]!r}", status=200)


HEAD_BYTES = 300
"""How much of a body that holds no event goes into its error."""

EMPTY_BODY_HINT = (
    "llama-cpp-python's server answers so when it fails after sending its headers, e.g. a tool call "
    "streamed under tool_choice \"auto\" with the chatml-function-calling chat format; see "
    "docs/compatibility.md for the settings that work")


def eventless_body_error(head: bytes) -> ProviderProtocolError:
    """The error for a 200 body that ended without a single SSE event. An empty one is
    retried: a gateway whose upstream connection dropped before the first event ends its own
    answer cleanly with nothing in it (Portkey), which the next attempt may not meet. (A
    llama.cpp server that fails so fails again, and its user then reads the hint.)"""
    if not head.strip():
        return ProviderProtocolError(f"the server answered HTTP 200 with an empty body instead of an event "
                                     f"stream ({EMPTY_BODY_HINT})", status=200, retryable=True)
    return ProviderProtocolError(f"the server answered HTTP 200 with a body that is not an event stream: "
                                 f"{head[:HEAD_BYTES]!r}", status=200)


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
    the recorded-stream tests run. Until the first SSE event it keeps the body's first bytes,
    so that a body holding none can say what it held."""

    __slots__ = ("decoder", "head", "parser", "seen")

    def __init__(self, parser: SSEParser) -> None:
        self.decoder = SSEDecoder()
        self.parser = parser
        self.seen = False
        self.head = b""

    def feed(self, chunk: bytes) -> Iterator[ProviderEvent]:
        """The chunk's events, one at a time: those before a bad payload still come out
        before its error is raised, so a failed step keeps what had arrived."""
        parse = self.parser.parse
        datas = self.decoder.feed_data(chunk)
        if not self.seen:
            if not datas:
                if len(self.head) < HEAD_BYTES:
                    self.head += chunk[:HEAD_BYTES]
                return
            self.seen = True
        for data in datas:
            yield from parse(data)

    def finish(self) -> Sequence[ProviderEvent]:
        """End of body: the events owed, or the error for a body that ended too early
        (``ProviderProtocolError`` when it held no event at all)."""
        self.decoder.flush()
        if not self.seen and not self.parser.done:
            raise eventless_body_error(self.head)
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
