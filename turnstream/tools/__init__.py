"""Tools: the ``@tool`` decorator, toolsets and the executor."""

from .tool import Tool, ToolContext, tool

__all__ = ["Tool", "ToolContext", "tool"]
