"""Streams are spread over clients so no connection pool carries more than ``per_client``."""

from __future__ import annotations

from contextlib import AsyncExitStack

from turnstream.providers.http import ClientPool


async def test_streams_fill_a_client_then_open_another_and_reuse_the_least_busy() -> None:
    pool = ClientPool(per_client=2)
    try:
        async with AsyncExitStack() as stack:
            got = [await stack.enter_async_context(pool.lease()) for _ in range(5)]
            assert [got.index(c) for c in got] == [0, 0, 2, 2, 4]  # clients 1, 1, 2, 2, 3
            assert pool._active == [2, 2, 1]
        assert pool._active == [0, 0, 0]
        async with pool.lease() as again:
            assert again is got[0]  # the first idle client, connections kept alive
    finally:
        await pool.aclose()
