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
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

import aiohttp
import httpx2
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
    return httpx2.create_ssl_context()


requests_log = logging.getLogger("turnstream.http")
"""One INFO line per model call (``HTTP Request: POST <url> "HTTP/1.1 200 OK"``); the server
hides it where it hides its own access log (``server/logs.py``)."""


class ClientPool:
    """The HTTP client of one provider: an aiohttp session, its connections kept alive.

    aiohttp rather than httpx2 because it costs less than half as much CPU per streamed turn
    on the same bytes (docs/performance.md: the relay floor fell from 12.1 to 5.9 ms a turn
    at N = 1,000), and its connection pool does not look at every connection each time a
    request starts (httpcore's does, which made a single client carrying a thousand streams
    spend a third of the server's CPU there).

    A session belongs to the event loop it was made in and is closed with it: ``asyncio.run``
    closes it as it ends (see ``_closed_with_loop``), so a pool used again from a later loop
    makes a new session there, and a pool nobody closed has its session closed when it is
    collected. Proxies come from the environment as before (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, ``NO_PROXY``), read once per URL for the pool's life: aiohttp's own
    ``trust_env`` reads them, and ``~/.netrc``, in a worker thread before every request (5 %
    of the relay floor's CPU).
    """

    def __init__(self, timeout: float = 600.0) -> None:
        self.timeout = aiohttp.ClientTimeout(total=None, connect=15.0, sock_read=timeout)
        """15 s to connect; then ``timeout`` between two reads (a model may think for minutes)."""
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keeper: AsyncGenerator[None, None] | None = None
        self._proxies: dict[str, str | None] = {}

    def session(self) -> aiohttp.ClientSession:
        """The session of the running loop, made on first use."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or self._loop is not loop or session.closed:
            self._let_go()
            # Idle connections kept 4 s: under the 5 s after which uvicorn (most model servers and
            # gateways) closes them, so a step after a long tool call never races that close.
            connector = aiohttp.TCPConnector(limit=0, ssl=_ssl_context(), keepalive_timeout=4.0)
            session = self._session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, auto_decompress=False)
            self._loop = loop
            self._keeper = _closed_with_loop(session)
        return session

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Any:
        """``async with pool.post(…) as response``: a POST whose body is read as it arrives."""
        proxy = self._proxies[url] if url in self._proxies else self._proxies.setdefault(url, env_proxy(url))
        return self.session().post(url, data=body, headers=headers, proxy=proxy)

    def _let_go(self) -> None:
        """Forget the session; closing it is its loop's business (a loop that ended has closed
        it already; one still running in another thread is asked to)."""
        keeper, loop = self._keeper, self._loop
        self._session = self._loop = self._keeper = None
        if keeper is not None and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: loop.create_task(keeper.aclose()))

    async def aclose(self) -> None:
        keeper, loop = self._keeper, self._loop
        if keeper is not None and loop is asyncio.get_running_loop():
            self._session = self._loop = self._keeper = None
            await keeper.aclose()
        else:
            self._let_go()


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, None where ``NO_PROXY`` exempts its host."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(parts.scheme) or proxies.get("all") or None


def _closed_with_loop(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """An async generator whose ``finally`` closes ``session``, started here by hand. The loop
    registers a generator at its first step, ``asyncio.run`` (and uvloop's) closes every one
    still open before it closes the loop, and a collected one is closed on its loop: so the
    session's connections are closed in their own loop however the pool ends. (aiohttp warns
    about, and cannot close, connections whose loop is gone.)"""

    async def keeper() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await session.close()

    gen = keeper()
    with contextlib.suppress(StopIteration):
        gen.asend(None).send(None)
    return gen


async def drain(chunks: AsyncIterator[bytes], timeout: float = 1.0) -> None:
    """Read what is left of a response after its final event (the end of the chunked body,
    which follows at once), so that the connection goes back to the pool. A response closed
    before its end cannot be reused: every step would open a new connection (and against a
    real API, a new TLS session). A body that does not end within ``timeout`` is closed."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            async for _ in chunks:
                pass


def loggable(url: str) -> str:
    """``url`` as logged: without a user and password and without its query (a gateway's key
    may ride in either)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


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
        log.debug("POST %s headers=%s body=%s", loggable(url), redact_headers(headers),
                  orjson.dumps(body).decode()[:20000])
    try:
        # No content coding (``accept-encoding: identity``, and the session decodes none): the
        # chunks are the bytes as sent, which the SSE decoder splits itself.
        headers = {**headers, "accept-encoding": "identity"}
        async with pool.post(url, orjson.dumps(body), headers) as resp:
            if requests_log.isEnabledFor(logging.INFO):
                requests_log.info('HTTP Request: POST %s "HTTP/%d.%d %d %s"', loggable(url), *resp.version,
                                  resp.status, resp.reason)
            if resp.status != 200:
                raise _error_from_body(resp.status, await resp.read(), resp.headers)
            if "json" in resp.headers.get("content-type", ""):
                raise _json_instead_of_stream(await resp.read(), resp.headers)
            try:
                async for chunk in resp.content.iter_any():
                    yield chunk
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise StreamBrokenError(f"the stream broke: {_describe(exc)}", retryable=True) from exc
    except ProviderError:
        raise
    except (aiohttp.ClientError, TimeoutError) as exc:
        # Before any byte of the body arrived: a connection problem, safe to retry.
        raise ProviderError(f"connection failed: {_describe(exc)}", retryable=True,
                            error_type="connection_error") from exc


def _describe(exc: BaseException) -> str:
    """``Type: message``; a timeout says which one (aiohttp's own read timeout has no text)."""
    text = str(exc) or ("no data for the read timeout" if isinstance(exc, TimeoutError) else "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
