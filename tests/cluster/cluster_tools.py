"""Server tools for the cluster suite, loaded by every node (``TURNSTREAM_TOOLS``).

Each records its start and its end (tool, idempotency key, node pid) in ``runs.jsonl`` of
the folder ``TURNSTREAM_TEST_CLUSTER_DIR`` names (the nodes' namespaces share the machine's
files), then waits ``seconds`` (an asyncio sleep: a slow side effect that costs no CPU), so a
test can kill or cut off a node while calls run and then count who ran what.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from turnstream import ToolContext, tool


def _record(what: str, tool_name: str, ctx: ToolContext) -> None:
    line = json.dumps({"what": what, "tool": tool_name, "key": ctx.idempotency_key, "pid": os.getpid()})
    with (Path(os.environ["TURNSTREAM_TEST_CLUSTER_DIR"]) / "runs.jsonl").open("a") as f:
        f.write(line + "\n")  # one short append: whole lines, whichever node writes


async def _work(name: str, seconds: float, ctx: ToolContext) -> str:
    _record("start", name, ctx)
    await asyncio.sleep(seconds)
    _record("end", name, ctx)
    return f"{name} done after {seconds:g} s"


@tool(timeout=120)
async def send_receipt(seconds: float, ctx: ToolContext) -> str:
    """Send a receipt (not safe to run twice)."""
    return await _work("send_receipt", seconds, ctx)


@tool(idempotent=True, timeout=120)
async def reserve_seat(seconds: float, ctx: ToolContext) -> str:
    """Reserve a seat with the idempotency key (safe to run again)."""
    return await _work("reserve_seat", seconds, ctx)


@tool(requires_approval=True, timeout=60)
def delete_draft(name: str) -> str:
    """Delete a draft (asks the user first)."""
    return f"deleted {name}"


TOOLS = [send_receipt, reserve_seat, delete_draft]
