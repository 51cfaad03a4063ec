"""MCP servers in the terminal chat: a server that does not start is said in the chat (once
when it fails, once when it is no longer tried, once when it is up again), and ``/mcp`` shows
each server's state and tries the ones that failed again at the next message."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from ..tools.server_status import ReportsStatus, ServerStatus

MCP_COMMAND = "/mcp"


class _Teller:
    """Prints a server's changes of state; nothing for one that starts at once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.failed = False

    def __call__(self, status: ServerStatus) -> None:
        if status.state == "up" and not self.failed:
            return
        self.failed = status.state != "up"
        mark = "[green]✓[/]" if status.state == "up" else "[yellow]⚠[/]"
        self.console.print(f"{mark} [dim]{escape(status.line())}[/]", highlight=False)


def watch(console: Console, toolsets: Sequence[object]) -> list[ReportsStatus]:
    """The toolsets that report their server's state, each now telling the chat of a change."""
    servers = [t for t in toolsets if isinstance(t, ReportsStatus)]
    for server in servers:
        server.on_status = _Teller(console)
    return servers


def show_and_retry(console: Console, servers: Sequence[ReportsStatus]) -> None:
    """``/mcp``: every server's state; those that did not start are tried again."""
    if not servers:
        console.print("[dim]no MCP servers (start the chat with --mcp-config FILE)[/]", highlight=False)
        return
    for server in servers:
        status = server.status()
        if status is None:
            console.print(f"[dim]MCP server {escape(getattr(server, 'name', '?'))}: not started yet[/]",
                          highlight=False)
            continue
        console.print(f"[dim]{escape(status.line())}[/]", highlight=False)
        if status.state != "up":
            server.retry()
            console.print("[dim]  it is tried again with your next message[/]", highlight=False)


__all__ = ["MCP_COMMAND", "show_and_retry", "watch"]
