"""The events of a turn (SPEC §8), shared by the loop, the encoders and the clients.

They are plain slotted dataclasses rather than pydantic models: one is made per streamed
delta, so they must cost little. ``data()`` gives the JSON payload of SPEC §8; the SSE,
WebSocket and AI SDK encoders all start from it. ``n`` rises by one per event within a
turn and, with ``turn_id``, forms the SSE id ``<turn_id>:<n>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from .blocks import BLOCK_ADAPTER, Block, Usage


@dataclass(slots=True)
class _Event:
    name: ClassVar[str]
    turn_id: str = field(default="", kw_only=True)
    n: int = field(default=0, kw_only=True)

    def data(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(slots=True)
class TurnStart(_Event):
    name: ClassVar[str] = "turn_start"
    session_id: str = ""

    def data(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "session_id": self.session_id}


@dataclass(slots=True)
class StepStart(_Event):
    name: ClassVar[str] = "step_start"
    step: int = 0
    max_steps: int = 0

    def data(self) -> dict[str, Any]:
        return {"step": self.step, "max_steps": self.max_steps}


@dataclass(slots=True)
class BlockStart(_Event):
    """A block opens. ``index`` is the block's ``seq`` in the turn."""

    name: ClassVar[str] = "block_start"
    index: int = 0
    type: str = "text"
    tool_use_id: str | None = None
    tool_name: str | None = None

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "type": self.type}
        if self.tool_use_id is not None:
            d["tool_use_id"] = self.tool_use_id
            d["name"] = self.tool_name
        return d


@dataclass(slots=True)
class BlockDelta(_Event):
    """A piece of a block: ``text`` for text and thinking, ``partial_json`` for tool input."""

    name: ClassVar[str] = "block_delta"
    index: int = 0
    text: str | None = None
    partial_json: str | None = None
    input: Any = None
    """Best-effort parse of the tool input received so far (tool blocks only)."""

    def data(self) -> dict[str, Any]:
        if self.partial_json is not None:
            return {"index": self.index, "partial_json": self.partial_json, "input": self.input}
        return {"index": self.index, "text": self.text}


@dataclass(slots=True)
class BlockStop(_Event):
    name: ClassVar[str] = "block_stop"
    index: int = 0
    block: Block | None = None

    def data(self) -> dict[str, Any]:
        blk = BLOCK_ADAPTER.dump_python(self.block, mode="json", exclude_none=True) if self.block else None
        return {"index": self.index, "block": blk}


@dataclass(slots=True)
class ToolRequest(_Event):
    """The turn waits for the client: to run a client tool, or to approve a server one."""

    name: ClassVar[str] = "tool_request"
    tool_use_id: str = ""
    tool_name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    executor: str = "client"
    requires_approval: bool = False

    def data(self) -> dict[str, Any]:
        return {
            "tool_use_id": self.tool_use_id,
            "name": self.tool_name,
            "input": self.input,
            "executor": self.executor,
            "requires_approval": self.requires_approval,
        }


@dataclass(slots=True)
class StepRestart(_Event):
    """A step's stream broke and is being retried; drop that step's partial blocks."""

    name: ClassVar[str] = "step_restart"
    step: int = 0
    reason: str = ""

    def data(self) -> dict[str, Any]:
        return {"step": self.step, "reason": self.reason}


@dataclass(slots=True)
class TurnComplete(_Event):
    name: ClassVar[str] = "turn_complete"
    status: str = "complete"
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    steps: int = 0

    def data(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "usage": self.usage.model_dump(),
            "steps": self.steps,
        }


@dataclass(slots=True)
class ErrorEvent(_Event):
    name: ClassVar[str] = "error"
    code: str = "error"
    message: str = ""
    retryable: bool = False

    def data(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}


StreamEvent: TypeAlias = (
    TurnStart | StepStart | BlockStart | BlockDelta | BlockStop | ToolRequest | StepRestart | TurnComplete
    | ErrorEvent
)

EVENT_TYPES: dict[str, type[_Event]] = {
    cls.name: cls
    for cls in (TurnStart, StepStart, BlockStart, BlockDelta, BlockStop, ToolRequest, StepRestart,
                TurnComplete, ErrorEvent)
}

__all__ = [
    "EVENT_TYPES",
    "BlockDelta",
    "BlockStart",
    "BlockStop",
    "ErrorEvent",
    "StepRestart",
    "StepStart",
    "StreamEvent",
    "ToolRequest",
    "TurnComplete",
    "TurnStart",
]
