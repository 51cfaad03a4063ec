"""The events of a turn (SPEC §8): the one owner of their payloads, both ways.

Every event is a slotted dataclass rather than a pydantic model: one is made per streamed
delta, so they must cost little. ``data()`` gives the JSON payload of SPEC §8 and
``from_data()`` reads one back; ``decode(name, data)`` picks the class from ``EVENT_TYPES``.
Nothing else in turnstream writes or parses these payloads by hand: the runner, the
close-out and the tool-result path build event objects; the store record
(``StoredEvent.of``) and the bus envelope (``Envelope.of``) are made from an event; the
terminal client decodes what the server sent with ``decode``.

``n`` rises by one per event within a turn and, with ``turn_id``, forms the SSE id
``<turn_id>:<n>``. ``decode(e.name, e.data(), turn_id=e.turn_id, n=e.n) == e`` for every
event (``tests/unit/test_events.py`` checks it for generated events of every kind).

Why one module of this size: every event's payload, both ways, in one place, so that what is
written and what is read back cannot drift apart; each class is small and alike. What they
share (the base class and the checked reads of a payload's fields) is ``event_payload.py``.
Elsewhere an event's type is named by its class's ``name`` (``TurnComplete.name``), never by
the string itself (``tests/unit/test_layout_rooms.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias, get_args

from pydantic import ValidationError

from .blocks import BLOCK_ADAPTER, Block, BlockType, TurnStatus, TurnStopReason, Usage
from .errors import InvalidValue
from .event_payload import (
    SCOPES,
    BudgetReached,
    BudgetScope,
    EventBase,
    as_bool,
    as_int,
    as_number,
    as_str,
    one_of,
    opt_dict,
    opt_int,
    opt_str,
)
from .tools.tool import Executor

_BLOCK_TYPES: tuple[str, ...] = get_args(BlockType)
_EXECUTORS: tuple[str, ...] = get_args(Executor)
_STATUSES: tuple[str, ...] = get_args(TurnStatus)
_STOP_REASONS: tuple[str, ...] = get_args(TurnStopReason)


@dataclass(slots=True)
class TurnStart(EventBase):
    """A turn began. Stored with the turn, in the same transaction."""

    name: ClassVar[str] = "turn_start"
    session_id: str = ""

    def data(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "session_id": self.session_id}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> TurnStart:
        return cls(session_id=as_str(data["session_id"]), turn_id=turn_id or as_str(data["turn_id"]), n=n)


@dataclass(slots=True)
class StepStart(EventBase):
    """A provider call (a step) begins."""

    name: ClassVar[str] = "step_start"
    step: int = 0
    """1-based number of the step within the turn."""
    max_steps: int = 0
    """The turn's step limit."""
    agent: str | None = None
    """The agent this step runs as, in a session of several agents (sent only when set)."""

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.step, "max_steps": self.max_steps}
        if self.agent is not None:
            d["agent"] = self.agent
        return d

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> StepStart:
        return cls(step=as_int(data["step"]), max_steps=as_int(data["max_steps"]), agent=opt_str(data.get("agent")),
                   turn_id=turn_id, n=n)


@dataclass(slots=True)
class BlockStart(EventBase):
    """A block opens. ``index`` is the block's ``seq`` in the turn."""

    name: ClassVar[str] = "block_start"
    index: int = 0
    type: BlockType = "text"
    tool_use_id: str | None = None
    """For ``tool_use`` and ``tool_result`` blocks: the call's id."""
    tool_name: str | None = None
    """For ``tool_use`` and ``tool_result`` blocks: the tool's name (``name`` on the wire)."""
    agent: str | None = None
    """The agent producing the block, in a session of several agents (sent only when set)."""

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "type": self.type}
        if self.tool_use_id is not None:
            d["tool_use_id"] = self.tool_use_id
            d["name"] = self.tool_name
        if self.agent is not None:
            d["agent"] = self.agent
        return d

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> BlockStart:
        tool_use_id = opt_str(data.get("tool_use_id"))
        return cls(index=as_int(data["index"]), type=one_of(data["type"], _BLOCK_TYPES, "type"),
                   tool_use_id=tool_use_id, tool_name=opt_str(data.get("name")) if tool_use_id is not None else None,
                   agent=opt_str(data.get("agent")), turn_id=turn_id, n=n)


@dataclass(slots=True)
class BlockDelta(EventBase):
    """A piece of a block: ``text`` for text and thinking, ``partial_json`` for tool input.
    Live only: deltas are numbered but never stored."""

    name: ClassVar[str] = "block_delta"
    index: int = 0
    text: str | None = None
    partial_json: str | None = None
    """The next fragment of a tool call's arguments, exactly as the model sent it."""
    input: Any = None
    """Best-effort parse of the tool input received so far (tool blocks only)."""
    output: Any = None
    """Best-effort parse of a structured answer's text so far (text blocks of an agent with
    an ``output`` model, docs/structured-output.md; sent only when there is one)."""

    def data(self) -> dict[str, Any]:
        if self.partial_json is not None:
            return {"index": self.index, "partial_json": self.partial_json, "input": self.input}
        if self.output is not None:
            return {"index": self.index, "text": self.text, "output": self.output}
        return {"index": self.index, "text": self.text}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> BlockDelta:
        index = as_int(data["index"])
        if "partial_json" in data:
            return cls(index=index, partial_json=as_str(data["partial_json"]), input=data.get("input"),
                       turn_id=turn_id, n=n)
        return cls(index=index, text=opt_str(data.get("text")), output=data.get("output"), turn_id=turn_id, n=n)


@dataclass(slots=True)
class BlockStop(EventBase):
    """A block is finished and stored; ``block`` is the stored block."""

    name: ClassVar[str] = "block_stop"
    index: int = 0
    block: Block | None = None

    def data(self) -> dict[str, Any]:
        blk = BLOCK_ADAPTER.dump_python(self.block, mode="json", exclude_none=True) if self.block else None
        return {"index": self.index, "block": blk}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> BlockStop:
        raw = data["block"]
        return cls(index=as_int(data["index"]), block=None if raw is None else BLOCK_ADAPTER.validate_python(raw),
                   turn_id=turn_id, n=n)


@dataclass(slots=True)
class ToolRequest(EventBase):
    """The turn waits for the client: to run a client tool, or to approve a server one."""

    name: ClassVar[str] = "tool_request"
    tool_use_id: str = ""
    tool_name: str = ""
    """The tool's name (``name`` on the wire)."""
    input: dict[str, Any] = field(default_factory=dict)
    executor: Executor = "client"
    """``client``: the client runs it and posts the result; ``server``: it waits for approval."""
    requires_approval: bool = False
    note: str | None = None
    """Why the user is asked, when there is more to say than the tool's need for approval:
    a call that may already have run before its server stopped, or a budget reached. Sent
    only when set."""
    elicitation: dict[str, Any] | None = None
    """A running server tool asks the user for input (an MCP elicitation): ``message``,
    ``requested_schema`` (JSON Schema of the answer) and ``state`` (opaque; kept for the
    tool). The answer is ``content`` (a JSON object) or ``approved: false``. Sent only when set."""
    budget: BudgetReached | None = None
    """Set when the call waits because the turn reached a budget ceiling (docs/budgets.md):
    approving it continues the turn with more budget. Sent only when set."""

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "tool_use_id": self.tool_use_id,
            "name": self.tool_name,
            "input": self.input,
            "executor": self.executor,
            "requires_approval": self.requires_approval,
        }
        if self.note is not None:
            d["note"] = self.note
        if self.elicitation is not None:
            d["elicitation"] = self.elicitation
        if self.budget is not None:
            d["budget"] = self.budget.data()
        return d

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> ToolRequest:
        raw_input = data["input"]
        if not isinstance(raw_input, dict):
            raise TypeError(f"input must be an object, not {raw_input!r}")
        return cls(tool_use_id=as_str(data["tool_use_id"]), tool_name=as_str(data["name"]), input=raw_input,
                   executor=one_of(data["executor"], _EXECUTORS, "executor"),
                   requires_approval=as_bool(data["requires_approval"]), note=opt_str(data.get("note")),
                   elicitation=opt_dict(data.get("elicitation"), "elicitation"),
                   budget=BudgetReached.from_data(data["budget"]) if data.get("budget") is not None else None,
                   turn_id=turn_id, n=n)


@dataclass(slots=True)
class ToolApproval(EventBase):
    """The user approved a server tool's call that waited for approval (a denial is stored as
    the call's ``is_error`` result instead). The call runs when the turn continues."""

    name: ClassVar[str] = "tool_approval"
    tool_use_id: str = ""
    approved: bool = True

    answer: dict[str, Any] | None = None
    """The answer to an ``elicitation`` request: ``action`` (accept or decline), ``content``
    and the request's ``state``; the call runs again with it. Sent only when set."""

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tool_use_id": self.tool_use_id, "approved": self.approved}
        if self.answer is not None:
            d["answer"] = self.answer
        return d

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> ToolApproval:
        return cls(tool_use_id=as_str(data["tool_use_id"]), approved=as_bool(data["approved"]),
                   answer=opt_dict(data.get("answer"), "answer"), turn_id=turn_id, n=n)


@dataclass(slots=True)
class ToolProgress(EventBase):
    """A running call says how far it got: an MCP server's ``notifications/progress``, or a
    tool's ``ToolContext.progress``. ``progress`` rises; ``total`` is known or None;
    ``message`` says what it does now. Live only, as deltas are: numbered, never stored."""

    name: ClassVar[str] = "tool_progress"
    tool_use_id: str = ""
    progress: float = 0.0
    total: float | None = None
    message: str | None = None

    def data(self) -> dict[str, Any]:
        return {"tool_use_id": self.tool_use_id, "progress": self.progress, "total": self.total,
                "message": self.message}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> ToolProgress:
        total = data.get("total")
        return cls(tool_use_id=as_str(data["tool_use_id"]), progress=as_number(data["progress"]),
                   total=None if total is None else as_number(total), message=opt_str(data.get("message")),
                   turn_id=turn_id, n=n)


@dataclass(slots=True)
class StepRestart(EventBase):
    """A step's stream broke and is being retried; drop that step's partial blocks."""

    name: ClassVar[str] = "step_restart"
    step: int = 0
    reason: str = ""

    def data(self) -> dict[str, Any]:
        return {"step": self.step, "reason": self.reason}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> StepRestart:
        return cls(step=as_int(data["step"]), reason=as_str(data["reason"]), turn_id=turn_id, n=n)


@dataclass(slots=True)
class StepUsage(EventBase):
    """A step ended: its tokens (cache reads and writes included) and its cost, and the
    turn's cost so far. Costs are in nano-dollars, 0 for a model without a price.

    With ``tool_use_id`` set it is a sub-step of ``step``: a model call that call's tool asked
    for while it ran (an MCP server's sampling request), metered like a step."""

    name: ClassVar[str] = "usage"
    step: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_nano_usd: int = 0
    turn_cost_nano_usd: int = 0
    tool_use_id: str | None = None

    def data(self) -> dict[str, Any]:
        out = {"step": self.step, "usage": self.usage.model_dump(), "cost_nano_usd": self.cost_nano_usd,
               "turn_cost_nano_usd": self.turn_cost_nano_usd}
        if self.tool_use_id is not None:
            out["tool_use_id"] = self.tool_use_id
        return out

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> StepUsage:
        call = data.get("tool_use_id")
        return cls(step=as_int(data["step"]), usage=Usage.model_validate(data["usage"]),
                   cost_nano_usd=as_int(data["cost_nano_usd"]), turn_cost_nano_usd=as_int(data["turn_cost_nano_usd"]),
                   tool_use_id=None if call is None else as_str(call), turn_id=turn_id, n=n)


@dataclass(slots=True)
class ContextManaged(EventBase):
    """A request was made smaller to fit the model's context window (docs/context.md): the
    results of ``cleared`` (tool call ids, oldest first) were left out of what was sent, the
    first ``summarised`` turns sent as a summary, and its estimated input went from
    ``tokens_before`` to ``tokens_after`` of ``window``.
    ``retry``: the provider had refused the request as too long. Stored; the blocks are not
    changed, only what the step sent."""

    name: ClassVar[str] = "context_managed"
    step: int = 0
    cleared: list[str] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    window: int = 0
    retry: bool = False
    summarised: int = 0
    """The session's first turns a summary now stands for (a ``compaction`` block), 0 if none."""

    def data(self) -> dict[str, Any]:
        return {"step": self.step, "cleared": self.cleared, "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "window": self.window, "retry": self.retry,
                "summarised": self.summarised}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> ContextManaged:
        return cls(step=as_int(data["step"]), cleared=[as_str(c) for c in data["cleared"]],
                   tokens_before=as_int(data["tokens_before"]), tokens_after=as_int(data["tokens_after"]),
                   window=as_int(data["window"]), retry=as_bool(data["retry"]),
                   summarised=as_int(data["summarised"]), turn_id=turn_id, n=n)


@dataclass(slots=True)
class BudgetWarning(EventBase):
    """A budget scope's spending reached the warning fraction of its ceiling (once per scope
    and ceiling). ``limit_*`` include what the user granted beyond the ceiling."""

    name: ClassVar[str] = "budget_warning"
    scope: BudgetScope = "turn"
    spent_tokens: int = 0
    spent_nano_usd: int = 0
    limit_tokens: int | None = None
    limit_nano_usd: int | None = None

    def data(self) -> dict[str, Any]:
        return {"scope": self.scope, "spent_tokens": self.spent_tokens, "spent_nano_usd": self.spent_nano_usd,
                "limit_tokens": self.limit_tokens, "limit_nano_usd": self.limit_nano_usd}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> BudgetWarning:
        return cls(scope=one_of(data["scope"], SCOPES, "scope"), spent_tokens=as_int(data["spent_tokens"]),
                   spent_nano_usd=as_int(data["spent_nano_usd"]), limit_tokens=opt_int(data["limit_tokens"]),
                   limit_nano_usd=opt_int(data["limit_nano_usd"]), turn_id=turn_id, n=n)


@dataclass(slots=True)
class TurnComplete(EventBase):
    """Control returns to the user: the turn ended, or it waits for the client
    (``status: awaiting_client``); a stream of the turn ends after it."""

    name: ClassVar[str] = "turn_complete"
    status: TurnStatus = "complete"
    stop_reason: TurnStopReason | None = None
    usage: Usage = field(default_factory=Usage)
    """Tokens over every step of the turn so far."""
    steps: int = 0

    def data(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "usage": self.usage.model_dump(),
            "steps": self.steps,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> TurnComplete:
        stop = data["stop_reason"]
        return cls(status=one_of(data["status"], _STATUSES, "status"),
                   stop_reason=None if stop is None else one_of(stop, _STOP_REASONS, "stop_reason"),
                   usage=Usage.model_validate(data["usage"]), steps=as_int(data["steps"]),
                   turn_id=turn_id or as_str(data["turn_id"]), n=n)


@dataclass(slots=True)
class ErrorEvent(EventBase):
    """The turn met an error; it ends with ``turn_complete`` (status ``failed``) right after."""

    name: ClassVar[str] = "error"
    code: str = "error"
    """What failed, e.g. ``provider_status``, ``stream_broken``, ``store_error``, ``internal_error``."""
    message: str = ""
    retryable: bool = False
    """Whether sending the message again may work."""

    def data(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> ErrorEvent:
        return cls(code=as_str(data["code"]), message=as_str(data["message"]), retryable=as_bool(data["retryable"]),
                   turn_id=turn_id, n=n)


@dataclass(slots=True)
class Reconnect(EventBase):
    """The server that sends a stream is stopping: the client follows the turn again from its
    last event id (the turn goes on here until the process stops, then wherever it is taken
    over). The last item of such a stream; not a turn event: never stored, ``n`` is 0, and it
    goes without an SSE id, so the client's Last-Event-ID stays the last real event's."""

    name: ClassVar[str] = "reconnect"
    reason: str = ""

    def data(self) -> dict[str, Any]:
        return {"reason": self.reason}

    @classmethod
    def from_data(cls, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> Reconnect:
        return cls(reason=as_str(data["reason"]), turn_id=turn_id, n=n)


StreamEvent: TypeAlias = (
    TurnStart | StepStart | BlockStart | BlockDelta | BlockStop | ToolRequest | ToolApproval | ToolProgress
    | StepRestart | StepUsage | ContextManaged | BudgetWarning | TurnComplete | ErrorEvent | Reconnect
)

EventName: TypeAlias = Literal["turn_start", "step_start", "block_start", "block_delta", "block_stop",
                               "tool_request", "tool_approval", "tool_progress", "step_restart", "usage",
                               "context_managed", "budget_warning", "turn_complete", "error", "reconnect"]

EVENT_TYPES: dict[str, type[StreamEvent]] = {
    cls.name: cls
    for cls in (TurnStart, StepStart, BlockStart, BlockDelta, BlockStop, ToolRequest, ToolApproval, ToolProgress,
                StepRestart, StepUsage, ContextManaged, BudgetWarning, TurnComplete, ErrorEvent, Reconnect)
}


def decode(name: str, data: Mapping[str, Any], *, turn_id: str = "", n: int = 0) -> StreamEvent:
    """The event named ``name`` with payload ``data``. ``InvalidValue`` (a ``ValueError``)
    for an unknown name or a payload that does not fit the event."""
    cls = EVENT_TYPES.get(name)
    if cls is None:
        raise InvalidValue("name", f"unknown event {name!r}")
    try:
        return cls.from_data(data, turn_id=turn_id, n=n)
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidValue("data", f"not a {name} event: {detail}") from None


__all__ = [
    "EVENT_TYPES",
    "BlockDelta",
    "BlockStart",
    "BlockStop",
    "BudgetReached",
    "BudgetScope",
    "BudgetWarning",
    "ContextManaged",
    "ErrorEvent",
    "EventName",
    "Reconnect",
    "StepRestart",
    "StepStart",
    "StepUsage",
    "StreamEvent",
    "ToolApproval",
    "ToolProgress",
    "ToolRequest",
    "TurnComplete",
    "TurnStart",
    "decode",
]
