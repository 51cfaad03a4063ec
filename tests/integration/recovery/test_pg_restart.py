"""PostgreSQL restarts (fast mode) in the middle of a turn (SPEC §6, issue 4).

A private cluster is restarted, so the shared server other tests use is never disturbed.
Whatever happens, the turn ends cleanly: it goes on (the pool replaces the connections the
restart killed) or it ends ``failed`` with an ``error`` event, once the database answers
again. It is never left ``running``, every block acknowledged (a ``block_stop`` a listener
received) is stored unchanged, and the next message in the session works.
"""

from __future__ import annotations

import asyncio
import subprocess
from contextlib import aclosing
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.pg import Cluster
from turnstream import Agent, TextBlock, tool
from turnstream.events import BlockStop, ErrorEvent, StreamEvent, TurnComplete
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.store import Store
from turnstream.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def scenario(call: str) -> dict[str, Any]:
    """Step 1 calls ``call``; step 2 streams three text blocks slowly (about a second)."""
    slow = [text(f"Part {i}: " + "more words arriving slowly. " * 3) for i in range(3)]
    return {"turns": [
        [{"blocks": [text("Let me do that."), {"type": "tool_use", "name": call, "input": {}}]},
         {"fragment_size": 3, "delay_ms": 10, "blocks": slow}],
        [{"blocks": [text("Still here.")]}]]}


async def run_turn(agent: Agent, on_event: Any = None) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async with aclosing(agent.stream("Do the thing.")) as stream:
        async for ev in stream:
            events.append(ev)
            if on_event is not None:
                await on_event(ev)
    return events


async def check_clean_end(store: Store, events: list[StreamEvent], session_id: str) -> str:
    """The turn ended, as stored, the way its last event said; nothing acknowledged is lost."""
    end = events[-1]
    assert isinstance(end, TurnComplete), events[-3:]
    turn = await store.get_turn(end.turn_id)
    assert turn is not None
    assert turn.status == end.status and turn.status in ("complete", "failed")
    acknowledged = [ev.block for ev in events if isinstance(ev, BlockStop)]
    assert [b.seq for b in turn.blocks] == list(range(len(turn.blocks)))
    for block in acknowledged:
        assert block is not None and turn.blocks[block.seq] == block
    errors = [ev for ev in events if isinstance(ev, ErrorEvent)]
    if turn.status == "failed":
        # The stream was told at once that the turn is held (live only: the store was what
        # failed), then the stored error ended it once the database was back.
        assert [e.code for e in errors] == ["store_unavailable", "store_error"] and turn.stop_reason == "error"
        # the message names the database's error: asyncpg's for a server that shut down or is
        # starting, or the socket's for one that refused the connection or dropped it
        names = ("Shutdown", "CannotConnectNow", "ConnectionDoesNotExist", "ConnectionRefused", "ConnectionReset")
        assert any(name in errors[-1].message for name in names), errors[-1].message
    else:
        assert errors == [] and turn.blocks[0] == TextBlock(seq=0, step=1, text="Let me do that.")
    return turn.status


async def next_turn_works(agent: Agent, mock: MockHandle, model: str) -> None:
    again = await agent.run("Are you still there?")
    assert again.status == "complete" and again.text == "Still here."
    messages = mock.requests(model)[-1]["messages"]
    last = {k: v for k, v in messages[-1]["content"][-1].items() if k != "cache_control"}  # less its cache breakpoint
    assert messages[-1]["role"] == "user" and last == text("Are you still there?")


@pytest.mark.parametrize("when", ["while a tool runs", "while the database is down", "while streaming"])
async def test_postgres_restart_mid_turn(when: str, pg_cluster: Cluster, mock_provider: MockHandle,
                                         scenario_name: str) -> None:
    starting: list[subprocess.Popen[bytes]] = []

    @tool
    async def restart_database() -> str:
        """Restart the database."""
        if when == "while a tool runs":  # back up before the tool returns
            await asyncio.to_thread(pg_cluster.pg_ctl, "-m", "fast", "restart")
        else:  # stopped; starting while the turn goes on and writes the result
            await asyncio.to_thread(pg_cluster.pg_ctl, "-m", "fast", "stop")
            starting.append(pg_cluster.start(wait=False))
        return "restarted"

    @tool
    def nothing() -> str:
        """Do nothing."""
        return "done"

    model = mock_provider.scenario(scenario_name, scenario("nothing" if when == "while streaming" else
                                                         "restart_database"))
    store = PostgresStore(pg_cluster.url)
    provider = AnthropicProvider(model, api_key="test-key", base_url=mock_provider.base_url)
    agent = Agent(provider, tools=[restart_database, nothing], store=store, session_id="ses-restart")
    restarted = False

    async def restart_mid_stream(ev: StreamEvent) -> None:
        # After the first block of step 2 is acknowledged, restart while the rest streams.
        nonlocal restarted
        if when == "while streaming" and isinstance(ev, BlockStop) and ev.index == 3 and not restarted:
            restarted = True
            await asyncio.to_thread(pg_cluster.pg_ctl, "-m", "fast", "restart")

    try:
        try:
            events = await asyncio.wait_for(run_turn(agent, restart_mid_stream), 60)
        finally:
            for proc in starting:
                await asyncio.to_thread(proc.communicate, timeout=90)
            await asyncio.to_thread(pg_cluster.wait_ready)
        status = await check_clean_end(store, events, "ses-restart")
        if when == "while a tool runs":
            # The restart is over when the next write comes: the pool replaced the dead
            # connections and the turn went on as if nothing had happened.
            assert status == "complete"
        elif when == "while the database is down":
            # The tool's result could not be written: the turn failed once the database was back.
            assert status == "failed"
            turn = await store.get_turn(events[-1].turn_id)
            assert turn is not None and turn.blocks[-1].type == "tool_result"
            assert turn.blocks[-1].is_error  # type: ignore[union-attr]
        else:
            assert restarted
        await next_turn_works(agent, mock_provider, model)
    finally:
        await agent.aclose()
