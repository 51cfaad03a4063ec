"""Request and response bodies of the HTTP API. ``/openapi.json`` is built from these.

Strings that reach the database refuse NUL characters and lone surrogates: PostgreSQL
cannot store the first, no JSON encoder writes the second, and both are easier to refuse
at the door (with a 422 naming the field) than to fail on deep inside a turn. Free-form
JSON (a client tool's schema, a tool part's output) refuses integers beyond 64 bits for the
same reason (the JSON encoder and the databases stop there). Booleans are strict: ``"yes"``
or ``1`` is not ``true``.

Why one module of this size: every body of the API in one place, with the few field types they
share, is what the OpenAPI document and its readers see as one contract.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from ..agents_config import AgentConfig
from ..blocks import Block, Usage
from ..storable import Text
from ..storable import storable as _storable

TOOLSETS = ("notebook", "calculator", "none")
Toolset = Literal["notebook", "calculator", "none"]
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

MAX_PART_CHARS = 16 * 1024 * 1024
"""Longest base64 text of one part (the request body is capped at 16 MiB anyway)."""


_INT_RANGE = (-(2**63), 2**64 - 1)


def storable_json(value: Any) -> Any:
    if isinstance(value, str):
        _storable(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise ValueError("integers must fit in 64 bits")
    elif isinstance(value, dict):
        for k, v in value.items():
            _storable(k)
            storable_json(v)
    elif isinstance(value, list):
        for v in value:
            storable_json(v)
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClientTool(_Body):
    """A tool the client runs itself: the turn pauses with a ``tool_request`` until the
    client posts the result to ``/api/sessions/{id}/tool-results``."""

    name: Annotated[str, Field(pattern=ID_PATTERN, description="Tool name as the model sees it.")]
    description: Text = Field(default="", max_length=10_000)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}},
                                         description="JSON Schema (an object schema) of the tool's input.")
    requires_approval: StrictBool = False

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, v: dict[str, Any]) -> dict[str, Any]:
        if v.get("type", "object") != "object":
            raise ValueError("must be a JSON Schema of type 'object'")
        return dict(storable_json(v))


def _unique_tool_names(tools: list[ClientTool] | None) -> list[ClientTool] | None:
    if tools:
        names = [t.name for t in tools]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"tool name {dup!r} is declared twice")
    return tools


ClientTools = Annotated[list[ClientTool] | None, Field(default=None, max_length=128),
                        AfterValidator(_unique_tool_names)]


class SessionCreate(_Body):
    title: Text = Field(default="", max_length=500)
    model: Text | None = Field(default=None, max_length=500,
                               description="provider:model for this session; the server's model when absent.")
    toolset: Toolset | None = Field(default=None, description="Server tools of the session (default: notebook).")
    agents: list[AgentConfig] | None = Field(default=None, min_length=1, max_length=16, description=(
        "Several agents in this session (docs/agents.md); the first answers first. Without it, the server's "
        "agents file, else one agent."))


class PartIn(_Body):
    """An image or a PDF of a message, its bytes in base64 (a ``data:`` URL is taken too)."""

    type: Literal["image", "file"]
    media_type: Annotated[str, Field(max_length=100, description="image/png, image/jpeg, image/gif, image/webp "
                                                                 "or application/pdf")]
    data: Annotated[str, Field(max_length=MAX_PART_CHARS, description="The bytes, base64.")]
    name: Annotated[str, Field(max_length=255)] | None = None


class TurnCreate(_Body):
    message: Text = Field(min_length=1, max_length=500_000, description="The user's message.")
    client_tools: ClientTools = None
    parts: list[PartIn] | None = Field(default=None, max_length=100,
                                       description="Images and PDFs sent with the message (docs/content-parts.md).")
    parent_turn_id: str | None = Field(default=None, max_length=200, description=(
        "The earlier turn of this session the new one follows (docs/branches.md): an edited message. Left out, "
        "the session's current leaf; null, no turn (a new version of the first message)."))


class CurrentIn(_Body):
    """The branch a session shows: the last turn of it (docs/branches.md)."""

    turn_id: str = Field(max_length=200, description="A turn of the session; a new turn follows it.")


class SteerOut(BaseModel):
    """What became of a message sent while the session's turn ran or waited (docs/steering.md)."""

    turn_id: str
    outcome: Literal["queued", "denied"]
    """``queued``: the running turn reads it at its next step; ``denied``: the calls waiting for
    approval were denied with it as the reason, and the turn goes on."""
    tool_use_ids: list[str] = []


class ToolResultIn(_Body):
    """The client's answer to a ``tool_request``: a client tool's result (``content``,
    ``is_error``), or an approval decision (``approved``) for a tool that needs one."""

    tool_use_id: Annotated[str, Field(min_length=1, max_length=200)]
    turn_id: str | None = Field(default=None, max_length=200,
                                description="The waiting turn; the session's waiting turn when absent.")
    content: Text | None = Field(default=None, max_length=10_000_000)
    is_error: StrictBool = False
    approved: StrictBool | None = None
    reason: Text | None = Field(default=None, max_length=10_000,
                                description="With approved=false: why, for the model to read with the denial.")
    always: StrictBool = Field(default=False, description=(
        "With approved=true: always allow this tool in this session; its later calls run without asking."))


def _whole(value: Any) -> Any:
    """A JSON number without a fraction (``3.0`` is 3, as JSON Schema's ``integer`` says),
    never a string or a boolean."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Index = Annotated[int, Field(strict=True, ge=0, le=100_000), BeforeValidator(_whole)]
Code = Annotated[str, AfterValidator(_storable), Field(max_length=1_000_000)]


class CellCreate(_Body):
    """A new notebook cell (it does not run)."""

    code: Code = Field(default="", description="The cell's source.")
    language: Literal["python", "sql"] = "python"
    index: Index | None = Field(default=None, description="Its position (0 is first); at the end when absent "
                                                          "or past the end.")


class CellPatch(_Body):
    """A change to a cell: any of its code, language and position."""

    code: Code | None = None
    language: Literal["python", "sql"] | None = None
    index: Index | None = Field(default=None, description="Move it to this position (0 is first).")
    base_code: Code | None = Field(default=None, description=(
        "The code this edit started from. When the cell's code is no longer this (the assistant or another "
        "tab changed it meanwhile), nothing changes and the answer is 409 with the current cell."))


class SessionOut(BaseModel):
    id: str
    title: str
    model: str
    toolset: str | None
    created_at: float
    agents: list[AgentConfig] | None = Field(default=None, description="Only for a session of several agents.")
    current_agent: str | None = Field(default=None, description="The agent that answers the next message "
                                                                "(only for a session of several agents).")
    current_leaf: str | None = Field(default=None, description="The last turn of the branch shown, which a new "
                                                               "turn follows (docs/branches.md); null before the "
                                                               "first turn.")


class TurnOut(BaseModel):
    id: str
    session_id: str
    input: str
    status: str
    blocks: list[Block]
    usage: Usage
    stop_reason: str | None
    steps: int
    model: str
    error: str | None
    created_at: float
    parent_turn_id: str | None = Field(default=None, description="The turn this one follows (docs/branches.md); "
                                                                 "null for a first turn.")


class SessionDetail(SessionOut):
    turns: list[TurnOut]


class SessionList(BaseModel):
    sessions: list[SessionOut]


class ToolResultOut(BaseModel):
    turn_id: str
    tool_use_id: str
    resumed: bool = Field(description="True when this was the last answer the turn waited for: it continues now.")
    last_event_id: str = Field(description="Follow the turn from here: GET …/turns/{turn_id}/events "
                                           "with this as Last-Event-ID.")


class CancelOut(BaseModel):
    turn_id: str
    status: str = Field(description="'cancelled', or 'cancelling' when another process runs the turn.")


class Deleted(BaseModel):
    deleted: bool


class Health(BaseModel):
    status: str
    store: str
    live_turns: int
    admission: dict[str, int]
    """Turns admitted, refused (503), started past the limit, waiting and running, since start."""
    bus: dict[str, int] | None = None
    """What the shared bus sent and received since start (PostgreSQL only)."""


class Readiness(BaseModel):
    ready: bool
    reason: str | None = None
    """Why not: ``draining`` (the process stops) or ``database unreachable``."""


class CellOut(BaseModel):
    id: str
    code: str
    language: Literal["python", "sql"]
    status: Literal["idle", "waiting", "running", "success", "error", "blocked"]
    outputs: list[dict[str, Any]] = Field(description="stdout, stderr, text, table, plotly and error outputs "
                                                      "(docs/notebook.md).")
    execution_count: int | None
    blocked_by: str | None = Field(description="When blocked: the upstream cell that failed or was interrupted; "
                                               "when waiting: the upstream cell running first.")
    edited_by: Literal["user", "assistant"] | None
    interrupted: bool = Field(default=False, description="Its last run was interrupted or timed out, and it "
                                                         "was not edited since: no other run re-runs it.")
    previous_kernel: bool = Field(default=False, description="Its status and outputs are from a kernel that "
                                                             "has gone (restarted, timed out, crashed).")


class NotebookCellOut(CellOut):
    stale: bool = Field(description="It needs to run again (never ran in this kernel, changed, or upstream did).")
    defines: list[str]
    uses: list[str]
    depends_on: list[str]


class FileOut(BaseModel):
    name: str
    variable: str = Field(description="The DataFrame name a cell reads it by.")
    format: Literal["csv", "tsv", "parquet", "json", "xlsx"]
    bytes: int
    sha256: str
    rows: int | None
    columns: list[str] | None
    numeric_columns: list[str] | None


class FileList(BaseModel):
    files: list[FileOut]


class NotebookOut(BaseModel):
    session_id: str
    version: int
    cells: list[NotebookCellOut]
    files: list[FileOut]
    sandbox: dict[str, Any]


class RunOut(BaseModel):
    cell: CellOut
    ran_upstream: list[str]
    blocked: list[str]
    seconds: float
    note: str | None = Field(default=None, description="Why it did not run, when an upstream cell stopped it.")


class RestartBody(_Body):
    """A restart of the notebook's kernel."""

    run_all: StrictBool = Field(default=False, description="Then run every cell in order, stopping after the first "
                                                     "that does not succeed.")


class RestartOut(NotebookOut):
    ran: list[str] = Field(description="The cells run after the restart (run_all), in order.")


class InterruptOut(BaseModel):
    cell_id: str
    status: Literal["interrupted", "interrupting", "not_running"] = Field(description=(
        "'interrupted': its run has ended; 'interrupting': another server process runs it and was asked to; "
        "'not_running': it was not running."))


class EditConflictOut(BaseModel):
    error: Literal["edit_conflict"]
    message: str
    cell: CellOut


class ImportOut(BaseModel):
    cells: list[CellOut]


class ErrorOut(BaseModel):
    error: str
    message: str
    detail: list[dict[str, Any]] | None = None


class UIApprovalIn(BaseModel):
    """A tool part's ``approval`` (AI SDK 6+): the decision, once the user made one."""

    model_config = ConfigDict(extra="allow")

    id: Text | None = Field(default=None, max_length=200)
    approved: StrictBool | None = None
    reason: Text | None = Field(default=None, max_length=10_000)


TEXT_PARTS = ("text", "reasoning")


class UIPartIn(BaseModel):
    """A part of a ``UIMessage``. The fields this server reads are typed as the AI SDK types
    them (a ``text`` is a string, never a number); a part's other fields, and the kinds it
    does not read (``step-start``, ``source-url``, ``data-*``), pass unread."""

    model_config = ConfigDict(extra="allow")

    type: Annotated[str, Field(min_length=1, max_length=200, description="text, reasoning, file, tool-<name>, "
                                                                         "dynamic-tool, step-start, data-<name>…")]
    text: Text | None = Field(default=None, max_length=500_000, description="A text or reasoning part's text.")
    mediaType: Text | None = Field(default=None, max_length=100)
    url: Text | None = Field(default=None, max_length=MAX_PART_CHARS)
    filename: Text | None = Field(default=None, max_length=255)
    toolCallId: Text | None = Field(default=None, max_length=200)
    toolName: Text | None = Field(default=None, max_length=200)
    state: Text | None = Field(default=None, max_length=100)
    errorText: Text | None = Field(default=None, max_length=100_000)
    approval: UIApprovalIn | None = None

    @model_validator(mode="after")
    def _text_has_text(self) -> UIPartIn:
        if self.type in TEXT_PARTS and self.text is None:
            raise ValueError(f"a {self.type} part needs its text (a string)")
        return self


class UIMessageIn(BaseModel):
    """A message as ``useChat`` sends it (AI SDK ``UIMessage``)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(default="", max_length=200)
    role: Literal["system", "user", "assistant"]
    parts: list[UIPartIn] = Field(default_factory=list)


class ChatApproval(_Body):
    """An approval decision sent with the chat (``approvals`` in the body): how a client whose
    messages cannot carry one (AI SDK 5) answers a server tool that needs approval."""

    tool_use_id: Annotated[str, Field(min_length=1, max_length=200, description="The call (its toolCallId).")]
    approved: StrictBool
    reason: Text | None = Field(default=None, max_length=10_000,
                                description="With approved=false: why, for the model to read with the denial.")


class ChatRequest(BaseModel):
    """The body ``useChat`` posts (AI SDK 5+): the chat id names the session. Extra fields
    from the transport's ``body`` option are allowed; ``client_tools``, ``model`` and
    ``toolset`` are read from there."""

    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(pattern=ID_PATTERN, description="The chat id, the caller's own: the session is "
                                                             "found by (caller, chat id), never by another "
                                                             "user's id.")]
    messages: list[UIMessageIn] = Field(min_length=1)
    trigger: str | None = None
    messageId: str | None = None
    client_tools: ClientTools = None
    model: Text | None = Field(default=None, max_length=500)
    toolset: Toolset | None = None
    approvals: list[ChatApproval] | None = Field(default=None, max_length=128,
                                                 description="Approval decisions for the waiting turn, besides "
                                                             "those the last message's parts carry (AI SDK 6+).")

    @field_validator("messages")
    @classmethod
    def _storable_messages(cls, v: list[UIMessageIn]) -> list[UIMessageIn]:
        for m in v:
            storable_json([p.model_extra for p in m.parts])
        return v


__all__ = [
    "TOOLSETS",
    "CellCreate",
    "CellOut",
    "CellPatch",
    "ChatApproval",
    "ChatRequest",
    "ClientTool",
    "CurrentIn",
    "EditConflictOut",
    "FileList",
    "FileOut",
    "ImportOut",
    "InterruptOut",
    "NotebookCellOut",
    "NotebookOut",
    "RunOut",
    "SessionCreate",
    "SessionDetail",
    "SessionList",
    "SessionOut",
    "ToolResultIn",
    "ToolResultOut",
    "TurnCreate",
    "TurnOut",
    "UIApprovalIn",
    "UIMessageIn",
    "UIPartIn",
]
