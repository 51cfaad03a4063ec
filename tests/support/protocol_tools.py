"""Server tools for the protocol checks (AI SDK, AG-UI), loaded by ``turnstream serve --tools``
(``TURNSTREAM_TOOLS=tests.support.protocol_tools:TOOLS``; the browser tests add ``snapshot``)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.media import GIF
from turnstream import ImagePart, tool


@tool(requires_approval=True)
def send_note(to: str, text: str) -> str:
    """Send a short note to someone (the user approves each one first)."""
    return f"note to {to} sent: {text}"


@tool(timeout=120)
def wait_for_gate() -> str:
    """Wait until the test opens the gate: the FIFO ``TURNSTREAM_TEST_GATE`` names. Opening it
    to read blocks until the test opens it to write, so the turn is running, in this tool, for
    as long as the test needs, with nothing timed."""
    return "through " + Path(os.environ["TURNSTREAM_TEST_GATE"]).read_text().strip()


@tool
def snapshot() -> list[object]:
    """A picture of the screen (a 1×1 GIF), with a line of text."""
    return ["the screen, as a GIF", ImagePart(GIF, "image/gif", "screen.gif")]


TOOLS = [send_note, wait_for_gate]
WEB_TOOLS = [*TOOLS, snapshot]
"""The browser tests' tools: these and one that returns an image."""
