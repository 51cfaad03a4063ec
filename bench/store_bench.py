"""Blocks appended per second, per store backend.

Each append is what the runner does when a block stops: the block and its ``block_stop``
event in one transaction. Two shapes are measured for every backend:

* ``1 turn``: one turn written block after block (a turn's writes are sequential);
* ``8 turns``: eight turns in eight sessions written at the same time (a busy server).

Each measurement stops after ``--seconds`` or ``--blocks`` appends, whichever comes first,
so the whole run takes a few seconds. PostgreSQL is measured when a server answers at
``--pg`` (default ``$TURNSTREAM_BENCH_PG`` or the local one), in a scratch schema that is
dropped afterwards.

    python -m bench.store_bench [--seconds 1.0] [--blocks 5000] [--pg URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from turnstream.blocks import BLOCK_ADAPTER, TextBlock
from turnstream.store import MemoryStore, Store, StoredEvent
from turnstream.store.sqlite import SQLiteStore

TEXT = "The weather in Paris is mild, with a light breeze from the west. " * 3


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def write_turn(store: Store, turn_id: str, deadline: float, limit: int) -> int:
    """Append blocks to one turn until the deadline or the limit; return how many."""
    n = 0
    for seq in range(limit):
        if time.perf_counter() >= deadline:
            return seq
        block = TextBlock(seq=seq, step=1 + seq // 10, text=TEXT)
        n += 3  # block_start and a delta took numbers too
        event = StoredEvent(turn_id, n, "block_stop",
                            {"index": seq, "block": BLOCK_ADAPTER.dump_python(block, mode="json")})
        await store.append_block(turn_id, block, event)
    return limit


async def measure(store: Store, turns: int, seconds: float, limit: int) -> float:
    ids = []
    for _ in range(turns):
        session = await store.create_session("usr_bench")
        ids.append((await store.create_turn(session.id, "bench", model="bench")).id)
    start = time.perf_counter()
    counts = await asyncio.gather(*(write_turn(store, tid, start + seconds, limit // turns) for tid in ids))
    return sum(counts) / (time.perf_counter() - start)


@asynccontextmanager
async def pg_schema(url: str) -> AsyncIterator[str | None]:
    """A scratch schema on the server at ``url`` (None when no server answers)."""
    try:
        import asyncpg
    except ImportError:
        yield None
        return
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        admin = await asyncpg.connect(url, timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:  # refused, timed out (an OSError), role unknown
        progress(f"postgres: not reachable at {url} ({type(exc).__name__}: {str(exc).strip()}); skipped")
        yield None
        return
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in url else "?"
        try:
            yield f"{url}{sep}options=-csearch_path%3D{schema}"
        finally:
            await admin.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        await admin.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=1.0, help="time limit per measurement")
    ap.add_argument("--blocks", type=int, default=5000, help="block limit per measurement")
    ap.add_argument("--pg", default=os.environ.get("TURNSTREAM_BENCH_PG",
                                                   "postgresql://postgres@127.0.0.1:5432/postgres"))
    args = ap.parse_args()

    results: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with pg_schema(args.pg) as pg_url:
            backends: list[tuple[str, Callable[[], Store]]] = [
                ("memory", MemoryStore),
                ("sqlite", lambda: SQLiteStore(Path(tmp) / "bench.db")),
            ]
            if pg_url is not None:
                from turnstream.store.postgres import PostgresStore

                backends.append(("postgres", lambda: PostgresStore(pg_url, pool_size=8)))
            for name, make in backends:
                store = make()
                await store.open()
                try:
                    for turns in (1, 8):
                        progress(f"{name}: {turns} turn(s), up to {args.seconds:g}s / {args.blocks} blocks…")
                        rate = await measure(store, turns, args.seconds, args.blocks)
                        results.append((name, f"{turns} turn" + ("s" if turns > 1 else ""), rate))
                finally:
                    await store.aclose()

    print(f"{'backend':<10} {'shape':<8} {'blocks/s':>10}")
    for name, shape, rate in results:
        print(f"{name:<10} {shape:<8} {rate:>10,.0f}")


if __name__ == "__main__":
    asyncio.run(main())
