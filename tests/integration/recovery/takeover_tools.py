"""Server tools for the take-over tests, loaded by ``turnstream serve --tools`` (``TURNSTREAM_TOOLS``).

Each records every start (tool, idempotency key, server pid) in ``runs.jsonl`` of the folder
``TURNSTREAM_TEST_TAKEOVER_DIR`` names; ``log_note`` then returns at once. A call of the two others
says on its first attempt that it started by writing a
line to the FIFO ``started`` (which blocks until the test reads it) and waits on the FIFO
``never``, which nobody ever writes: the test kills its server while it waits. A later attempt of
the same call (same idempotency key: the server that took the turn over ran it again) returns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from turnstream import ToolContext, tool


def _attempt(name: str, ctx: ToolContext) -> str:
    folder = Path(os.environ["TURNSTREAM_TEST_TAKEOVER_DIR"])
    log = folder / "runs.jsonl"
    earlier = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    again = any(r["key"] == ctx.idempotency_key for r in earlier)
    with log.open("a") as f:
        f.write(json.dumps({"tool": name, "key": ctx.idempotency_key, "pid": os.getpid()}) + "\n")
    if not again:
        with (folder / "started").open("w") as f:  # blocks until the test opens it to read
            f.write(f"{name}\n")
        (folder / "never").read_text()  # blocks for good: nobody opens it to write
    return f"{name} done (attempt {len(earlier) + 1})"


@tool(idempotent=True, timeout=600)
def charge_once(amount: int, ctx: ToolContext) -> str:
    """Charge an amount, with the idempotency key (safe to run again)."""
    return _attempt("charge_once", ctx)


@tool(timeout=600)
def send_email(to: str, ctx: ToolContext) -> str:
    """Send an email (not safe to run twice)."""
    return _attempt("send_email", ctx)


@tool(timeout=60)
def log_note(text: str, ctx: ToolContext) -> str:
    """Write a note to a log (not safe to run twice); returns at once."""
    log = Path(os.environ["TURNSTREAM_TEST_TAKEOVER_DIR"]) / "runs.jsonl"
    with log.open("a") as f:
        f.write(json.dumps({"tool": "log_note", "key": ctx.idempotency_key, "pid": os.getpid()}) + "\n")
    return f"noted: {text}"


TOOLS = [charge_once, send_email, log_note]
