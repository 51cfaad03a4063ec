"""A provider's HTTP client: one aiohttp session per event loop, its connections kept alive
between steps, closed without warnings however the pool ends."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from turnstream.errors import StreamBrokenError
from turnstream.providers.http import ClientPool, env_proxy, loggable, open_stream


@asynccontextmanager
async def serve_app(app: Starlette) -> AsyncIterator[str]:
    """``app`` under uvicorn in this loop. The socket listens before the server starts, so a
    client may connect at once (the kernel queues it until the server accepts)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


def streaming_app(peers: list[tuple[str, int]]) -> Starlette:
    async def stream(request: Request) -> StreamingResponse:
        assert request.client is not None
        peers.append((request.client.host, request.client.port))
        await request.body()

        async def body() -> AsyncIterator[bytes]:
            yield b"event: a\ndata: {}\n\n"
            yield b"event: b\ndata: {}\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", stream, methods=["POST"])])


async def read_all(pool: ClientPool, url: str) -> bytes:
    out = b""
    async for chunk in open_stream(pool, url, {}, {"stream": True}):
        out += chunk
    return out


async def test_steps_reuse_one_kept_alive_connection() -> None:
    peers: list[tuple[str, int]] = []
    async with serve_app(streaming_app(peers)) as base:
        pool = ClientPool()
        try:
            for _ in range(3):
                assert await read_all(pool, base + "/v1/messages") == b"event: a\ndata: {}\n\nevent: b\ndata: {}\n\n"
            session = pool.session()
            assert pool.session() is session
        finally:
            await pool.aclose()
    assert len(peers) == 3 and len(set(peers)) == 1, peers  # one client port: the same connection


def test_a_pool_used_from_a_second_loop_makes_a_session_there_and_the_first_closed_with_its_loop() -> None:
    async def one_call(pool: ClientPool, url: str) -> object:
        await read_all(pool, url)
        return pool.session()

    async def run_twice() -> None:
        peers: list[tuple[str, int]] = []
        async with serve_app(streaming_app(peers)) as base:
            pool = ClientPool()
            url = base + "/v1/messages"
            first = await asyncio.get_running_loop().run_in_executor(None, asyncio.run, one_call(pool, url))
            second = await one_call(pool, url)
            assert second is not first and not second.closed  # type: ignore[attr-defined]
            assert first.closed  # type: ignore[attr-defined]
            await pool.aclose()
            assert second.closed  # type: ignore[attr-defined]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asyncio.run(run_twice())
        gc.collect()


async def test_a_pool_nobody_closed_lets_its_session_go_without_warnings() -> None:
    peers: list[tuple[str, int]] = []
    async with serve_app(streaming_app(peers)) as base:
        pool = ClientPool()
        await read_all(pool, base + "/v1/messages")
        session = pool.session()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            del pool
            gc.collect()
            for _ in range(10):  # the loop runs the collected keeper's close as a task of its own
                if session.closed:
                    break
                await asyncio.sleep(0)
            assert session.closed


@pytest.mark.parametrize("timeout", [0.3])
async def test_a_silent_server_is_a_broken_stream_after_the_read_timeout(timeout: float) -> None:
    gate = asyncio.Event()

    async def silent(request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield b"event: a\ndata: {}\n\n"
            await gate.wait()
            yield b""

        return StreamingResponse(body(), media_type="text/event-stream")

    async with serve_app(Starlette(routes=[Route("/s", silent, methods=["POST"])])) as base:
        pool = ClientPool(timeout=timeout)
        try:
            chunks = []
            with pytest.raises(StreamBrokenError) as err:
                async for chunk in open_stream(pool, base + "/s", {}, {}):
                    chunks.append(chunk)
            assert chunks == [b"event: a\ndata: {}\n\n"]
            assert err.value.retryable and "timeout" in str(err.value).lower()
        finally:
            gate.set()
            await pool.aclose()


async def test_a_proxy_named_by_the_environment_carries_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts: list[str] = []

    async def proxy(request: Request) -> StreamingResponse:
        hosts.append(request.headers["host"])

        async def body() -> AsyncIterator[bytes]:
            yield b"event: a\ndata: {}\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    async with serve_app(Starlette(routes=[Route("/v1/messages", proxy, methods=["POST"])])) as base:
        monkeypatch.setenv("HTTP_PROXY", base)
        monkeypatch.setenv("NO_PROXY", "exempt.invalid")
        assert env_proxy("http://model.invalid/v1/messages") == base
        assert env_proxy("http://exempt.invalid/v1/messages") is None
        pool = ClientPool()
        try:
            assert await read_all(pool, "http://model.invalid/v1/messages") == b"event: a\ndata: {}\n\n"
        finally:
            await pool.aclose()
    assert hosts == ["model.invalid"]  # the proxy was asked for the model's host


async def test_a_stream_cancelled_midway_drops_its_connection_and_the_next_step_gets_a_fresh_one() -> None:
    peers: list[tuple[str, int]] = []
    disconnected = asyncio.Event()

    async def endless(request: Request) -> StreamingResponse:
        assert request.client is not None
        peers.append((request.client.host, request.client.port))
        if len(peers) > 1:
            return StreamingResponse(iter([b"event: a\ndata: {}\n\n"]), media_type="text/event-stream")

        async def body() -> AsyncIterator[bytes]:
            try:
                while True:
                    yield b"event: a\ndata: {}\n\n"
                    await asyncio.sleep(0.01)  # a model still talking (pacing, not synchronisation)
            finally:
                disconnected.set()

        return StreamingResponse(body(), media_type="text/event-stream")

    async with serve_app(Starlette(routes=[Route("/v1/messages", endless, methods=["POST"])])) as base:
        pool = ClientPool()
        url = base + "/v1/messages"
        first_chunk = asyncio.Event()

        async def consume() -> None:
            async for _ in open_stream(pool, url, {}, {}):
                first_chunk.set()

        task = asyncio.create_task(consume())
        try:
            await first_chunk.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.wait_for(disconnected.wait(), 10)  # the server saw the connection go
            assert await read_all(pool, url) == b"event: a\ndata: {}\n\n"
        finally:
            await pool.aclose()
    assert len(peers) == 2 and peers[0] != peers[1]  # not the cancelled stream's connection


async def test_a_model_call_is_logged_without_the_urls_user_password_or_query(caplog: pytest.LogCaptureFixture) -> None:
    peers: list[tuple[str, int]] = []
    async with serve_app(streaming_app(peers)) as base:
        host = base.removeprefix("http://")
        pool = ClientPool()
        try:
            with caplog.at_level(logging.DEBUG, logger="turnstream"):
                await read_all(pool, f"http://gw:hunter2@{host}/v1/messages?key=sk-secret")
        finally:
            await pool.aclose()
    lines = [r.getMessage() for r in caplog.records]
    assert f'HTTP Request: POST http://{host}/v1/messages "HTTP/1.1 200 OK"' in lines, lines
    assert not [line for line in lines if "hunter2" in line or "sk-secret" in line], lines
    assert loggable("https://u:p@[::1]:8443/v1/chat/completions?api-version=1&key=k") == (
        "https://[::1]:8443/v1/chat/completions")
