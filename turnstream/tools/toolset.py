"""``Toolset``: a source of tools known only at run time (an MCP server), passed in
``Agent(tools=[...])`` or ``RunConfig.tools`` next to ``Tool`` objects.

The runner asks it for its tools before each model request; it answers from its cache,
refreshing it when its source says its tools changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .tool import Tool


@runtime_checkable
class Toolset(Protocol):
    async def list_tools(self) -> list[Tool]:
        """The tools now (cached); those last known when the source cannot be reached."""
        ...

    def known_tool_names(self) -> set[str]:
        """The names of the tools last listed, without asking the source."""
        ...

    async def aclose(self) -> None:
        """Let go of the source (a process, a connection)."""
        ...


def split_tools(tools: Sequence[Tool | Toolset]) -> tuple[list[Tool], list[Toolset]]:
    """The plain tools and the toolsets of a mixed list."""
    return [t for t in tools if isinstance(t, Tool)], [t for t in tools if not isinstance(t, Tool)]


def tool_names(tools: Sequence[Tool | Toolset]) -> set[str]:
    """The names of the tools in a mixed list, the toolsets' as they last listed them."""
    plain, toolsets = split_tools(tools)
    return {t.name for t in plain}.union(*(ts.known_tool_names() for ts in toolsets))


__all__ = ["Toolset", "split_tools", "tool_names"]
