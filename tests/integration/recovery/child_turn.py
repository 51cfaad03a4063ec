"""The process the crash tests kill -9: one turn of ``Agent(...).stream()`` against the mock
provider over HTTP (``ANTHROPIC_BASE_URL``), its store a database URL.

    python child_turn.py STORE_URL SESSION_ID MODEL RUNS_FILE FIFO

It prints one JSON line per event as soon as the event reaches it, flushed, so the parent
knows when to kill it:

* ``{"event": "block_stop", "block": {...}}``: the block is committed (events reach a
  listener only after their write commits), so it must survive the kill;
* ``{"event": "delta", "index": i}``: the first delta of block ``i`` (the stream is live);
* ``{"event": "tool_started", "tool": name}``: a tool began (written by the tool itself);
* ``{"event": <name>}`` for every other event.

Two tools: ``echo`` returns at once; ``wait_for_signal`` opens FIFO for reading, which
blocks until a writer opens it, and none ever does. Each tool appends its name to RUNS_FILE
when it starts, so the parent can tell whether a tool ran again after the crash.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from contextlib import aclosing
from pathlib import Path
from typing import Any

import orjson

from turnstream import Agent, tool
from turnstream.events import BlockDelta, BlockStop

_out = threading.Lock()


def report(line: dict[str, Any]) -> None:
    data = orjson.dumps(line) + b"\n"
    with _out:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def main() -> None:
    store_url, session_id, model, runs_file, fifo = sys.argv[1:6]
    loop: asyncio.AbstractEventLoop | None = None

    def started(name: str) -> None:
        with open(runs_file, "a") as f:
            f.write(name + "\n")
        # Reported through the event loop, after the events already handed to the listener
        # (the tool runs in a worker thread, which may start before the listener has
        # printed the call's block_stop).
        assert loop is not None
        loop.call_soon_threadsafe(report, {"event": "tool_started", "tool": name})

    @tool
    def echo(value: str) -> str:
        """Echo a value."""
        started("echo")
        return f"echo:{value}"

    @tool(timeout=600)
    def wait_for_signal(name: str) -> str:
        """Wait for a signal that never comes."""
        started("wait_for_signal")
        return Path(fifo).read_text()  # blocks: nobody opens the FIFO for writing

    async def turn() -> None:
        nonlocal loop
        loop = asyncio.get_running_loop()
        agent = Agent(model, tools=[echo, wait_for_signal], store=store_url, session_id=session_id)
        deltas: set[int] = set()
        async with aclosing(agent.stream("start the work")) as events:
            async for ev in events:
                if isinstance(ev, BlockStop):
                    assert ev.block is not None
                    report({"event": "block_stop", "block": ev.block.model_dump(mode="json")})
                elif isinstance(ev, BlockDelta):
                    if ev.index not in deltas:
                        deltas.add(ev.index)
                        report({"event": "delta", "index": ev.index})
                else:
                    report({"event": ev.name})
        await agent.aclose()

    asyncio.run(turn())


if __name__ == "__main__":
    main()
