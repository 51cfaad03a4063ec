"""turnstream: an agent runtime that gets streaming tool calls right."""

from .agent import Agent
from .blocks import (
    Block,
    ProviderBlock,
    RedactedThinkingBlock,
    Session,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    Usage,
)
from .errors import (
    ProviderError,
    RunError,
    TurnstreamError,
    UsageError,
)
from .events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ErrorEvent,
    StepRestart,
    StepStart,
    StreamEvent,
    ToolRequest,
    TurnComplete,
    TurnStart,
)
from .limits import Limits
from .tools import Tool, ToolContext, tool

__all__ = [
    "Agent",
    "Block",
    "BlockDelta",
    "BlockStart",
    "BlockStop",
    "ErrorEvent",
    "Limits",
    "ProviderBlock",
    "ProviderError",
    "RedactedThinkingBlock",
    "RunError",
    "Session",
    "StepRestart",
    "StepStart",
    "StreamEvent",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolContext",
    "ToolRequest",
    "ToolResultBlock",
    "ToolUseBlock",
    "Turn",
    "TurnComplete",
    "TurnStart",
    "TurnstreamError",
    "Usage",
    "UsageError",
    "tool",
]
