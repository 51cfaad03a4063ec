"""Server tools for the protocol checks (AI SDK, AG-UI), loaded by ``turnstream serve --tools``
(``TURNSTREAM_TOOLS=tests.support.protocol_tools:TOOLS``)."""

from __future__ import annotations

from turnstream import tool


@tool(requires_approval=True)
def send_note(to: str, text: str) -> str:
    """Send a short note to someone (the user approves each one first)."""
    return f"note to {to} sent: {text}"


TOOLS = [send_note]
