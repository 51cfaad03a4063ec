"""The two asyncio helpers the core needs beyond the standard library.

turnstream is asyncio-only (docs/design.md says why): asyncpg and uvloop are asyncio-only,
so an anyio layer would buy no portability. What anyio gave for free is written here once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def shielded(aw: Awaitable[T]) -> T:
    """Await ``aw`` to its end even when the caller is cancelled meanwhile (clean-up that
    must finish: a turn's close-out, a database write already sent). A cancellation that
    arrived while waiting is raised once ``aw`` has finished; an error of ``aw`` is raised
    as it is."""
    fut = asyncio.ensure_future(aw)
    interrupted = False
    while True:
        try:
            result = await asyncio.shield(fut)
        except asyncio.CancelledError:
            if fut.done():  # ``aw`` itself was cancelled, not just us
                raise
            interrupted = True
            continue
        if interrupted:
            raise asyncio.CancelledError
        return result


__all__ = ["shielded"]
