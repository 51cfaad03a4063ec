"""SQLite's fast path never waits on the event loop: a call that finds the database locked
by another connection moves to the worker thread, waits there, and then succeeds."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from turnstream.store.sqlite import SQLiteStore


async def test_a_locked_database_is_waited_for_in_the_thread_not_on_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SQLiteStore(path)
    await store.open()
    try:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        task = asyncio.create_task(store.create_session("usr_1", title="waits"))
        for _ in range(1000):  # bounded: until the call has left the fast path
            if store._queued:
                break
            await asyncio.sleep(0)
        assert store._queued == 1 and not task.done()
        heartbeat = asyncio.create_task(asyncio.sleep(0))
        await heartbeat  # the event loop is free while the call waits for the lock
        other.execute("COMMIT")
        other.close()
        session = await task
        assert (await store.get_session(session.id)) is not None
        assert store._queued == 0
    finally:
        await store.aclose()
