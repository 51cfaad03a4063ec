"""Tools: the ``@tool`` decorator, toolsets and the executor."""

from ..errors import InputNeeded
from .tool import Tool, ToolContext, tool
from .toolset import Toolset

__all__ = ["InputNeeded", "Tool", "ToolContext", "Toolset", "tool"]
