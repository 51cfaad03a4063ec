"""Whether a toolset that is a server of its own (an MCP server) is up, for the chats to show.

A server that cannot start is tried again after a pause that grows, and after a few failures
in a row not at all until the user asks (``retry``): a command that dies at once is then not
started again before every model request. A toolset that reports so calls ``on_status`` when
its state changes; the terminal chat prints it, the server keeps it for the web chat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

State = Literal["up", "retrying", "stopped"]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    state: State
    error: str | None = None
    """Why its last start failed (``retrying``, ``stopped``)."""
    failures: int = 0
    """Failed starts in a row."""
    retry_in: float | None = None
    """Seconds until the next try (``retrying``); None when it is tried at each use."""

    def line(self) -> str:
        """One sentence for a person."""
        if self.state == "up":
            return f"MCP server {self.name} is up"
        if self.state == "retrying":
            when = f"in {self.retry_in:.0f} s" if self.retry_in is not None else "at the next use"
            return (f"MCP server {self.name} did not start ({self.error}); its tools are missing until it does, "
                    f"and it is tried again {when}")
        return (f"MCP server {self.name} did not start {self.failures} times ({self.error}); it is not tried "
                "again until you ask (/mcp in the terminal chat)")

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "state": self.state, "error": self.error, "failures": self.failures,
                "message": self.line()}


@runtime_checkable
class ReportsStatus(Protocol):
    """A toolset that says whether its server is up."""

    on_status: Callable[[ServerStatus], None] | None

    def status(self) -> ServerStatus | None:
        """Its state now; None before its first start."""
        ...

    def retry(self) -> None:
        """Try to start it again at the next use, however often it failed."""
        ...


__all__ = ["ReportsStatus", "ServerStatus", "State"]
