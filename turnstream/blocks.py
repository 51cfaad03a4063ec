"""The nouns of a conversation: blocks, usage, turns and sessions.

A turn is stored as an ordered list of blocks. Every block carries its position in the
turn (``seq``) and the provider call that produced it (``step``). The same pydantic models
are used by the store, the SSE/WebSocket encoders and the library API, through the one
``BLOCK_ADAPTER`` below.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]
"""Why one provider call (a step) ended, normalised across providers."""

TurnStopReason: TypeAlias = Literal[
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn",
    "max_steps", "budget", "awaiting_client", "cancelled", "error",
]
"""Why a turn handed control back: a step's stop reason, or one the loop decided."""

TurnStatus: TypeAlias = Literal["running", "awaiting_client", "complete", "failed", "cancelled", "interrupted"]
BlockType: TypeAlias = Literal["text", "thinking", "redacted_thinking", "tool_use", "tool_result", "provider", "user",
                               "compaction"]


class Attachment(BaseModel):
    """An image or a file in a message or a tool result: a reference to bytes stored once,
    by content hash, in the store's blobs (``Store.put_blob``)."""

    model_config = ConfigDict(extra="forbid")

    sha256: str
    media_type: str
    size: int
    name: str | None = None


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int = 0
    """Position of the block inside its turn: 0, 1, 2… without gaps."""
    step: int = 0
    """The provider call (1-based) that produced this block; tool results share their call's step."""
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The agent that produced the block (a tool result: the agent that made the call), in a
    session of several agents (docs/agents.md); left out when the session has one."""


class TextBlock(_Block):
    """Text written by the model."""

    type: Literal["text"] = "text"
    text: str
    citations: list[dict[str, Any]] | None = None
    """Provider citations attached to the text, kept as the provider sent them."""


class ThinkingBlock(_Block):
    """Visible reasoning, replayed unchanged (with its signature) to the model that made it."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""
    origin: str | None = None
    """``provider:model`` that produced it; never replayed to another model."""


class RedactedThinkingBlock(_Block):
    """Encrypted reasoning; only its opaque ``data`` exists and is replayed unchanged."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str
    origin: str | None = None


class ToolUseBlock(_Block):
    """A tool call the model made. ``input`` is the parsed arguments; ``raw_input`` the exact bytes."""

    type: Literal["tool_use"] = "tool_use"
    tool_use_id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    raw_input: str | None = None
    """Arguments exactly as the model streamed them (``None`` when they were not streamed)."""
    input_error: str | None = None
    """Why ``raw_input`` could not be used (invalid JSON, cut off by max_tokens); the call is not run."""


class ToolResultBlock(_Block):
    """The outcome of one tool call. Every ``tool_use`` gets exactly one, in call order."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False
    attachments: list[Attachment] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Images the tool returned besides its text (serialised only when there are some)."""


class UserBlock(_Block):
    """What the user added to a turn besides its input text: the input's attachments (step 0),
    or a message sent while the turn ran (after the results of the step it followed)."""

    type: Literal["user"] = "user"
    text: str = ""
    attachments: list[Attachment] = Field(default_factory=list)


class ProviderBlock(_Block):
    """A provider-native block turnstream does not interpret (server tool calls and their
    results, compaction, …). Kept verbatim and replayed only to the provider that made it."""

    type: Literal["provider"] = "provider"
    provider: str
    data: dict[str, Any]
    origin: str | None = None


class CompactionBlock(_Block):
    """A summary of the session's first ``covers`` turns, written by the model to fit its
    context window (docs/context.md). Every later request sends it in place of those turns;
    the turns stay stored whole. Kept in the turn that made it; never sent as itself."""

    type: Literal["compaction"] = "compaction"
    summary: str
    covers: int
    """How many of the session's first turns the summary stands for."""


Block: TypeAlias = Annotated[
    TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock | ToolResultBlock | ProviderBlock | UserBlock
    | CompactionBlock,
    Field(discriminator="type"),
]
BLOCK_ADAPTER: TypeAdapter[Block] = TypeAdapter(Block)
"""Serialises and parses every block kind; used by the store and every encoder."""
BLOCKS_ADAPTER: TypeAdapter[list[Block]] = TypeAdapter(list[Block])


class Usage(BaseModel):
    """Token counts of one step, or the sum over a turn."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    unknown: bool = Field(default=False, exclude_if=lambda v: not v)
    """True when the provider reported no token counts (llama-cpp-python's server sends none):
    the zeros above are then not a measurement. In a turn's sum it is true when any step's
    usage was unknown, and the counts are those of the steps that reported theirs. Serialised
    only when true, so a usage that was reported keeps its stored and ``turn_complete`` form."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            unknown=self.unknown or other.unknown,
        )


class Turn(BaseModel):
    """One user message and everything up to the moment control returns to the user."""

    id: str
    session_id: str
    input: str
    status: TurnStatus = "running"
    blocks: list[Block] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    """The sum over every step, cancelled and restarted ones included."""
    step_usage: list[Usage] = Field(default_factory=list)
    """Usage of each provider call, in order (a restarted step appears once per attempt)."""
    stop_reason: TurnStopReason | None = None
    steps: int = 0
    model: str = ""
    error: str | None = None
    created_at: float = 0.0
    parent_turn_id: str | None = None
    """The turn this one follows (its parent in the session's tree of turns); None for a first turn."""

    @property
    def text(self) -> str:
        """The text of the final step (what a chat shows as the answer)."""
        last = max((b.step for b in self.blocks), default=0)
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock) and b.step == last)


class Session(BaseModel):
    """A conversation owned by one user: ordered turns."""

    id: str
    user_id: str
    title: str = ""
    model: str = ""
    toolset: str | None = None
    created_at: float = 0.0
    agents: list[dict[str, Any]] | None = None
    """The session's agents as configured (docs/agents.md), or None for a one-model session."""
    current_agent: str | None = None
    """The agent that answers the next message (changed by a hand-off)."""
    current_leaf: str | None = None
    """The last turn of the branch shown (docs/branches.md): a new turn follows it unless told
    otherwise; None before the first turn."""
    turns: list[Turn] = Field(default_factory=list)


__all__ = [
    "BLOCKS_ADAPTER",
    "BLOCK_ADAPTER",
    "Attachment",
    "Block",
    "BlockType",
    "CompactionBlock",
    "ProviderBlock",
    "RedactedThinkingBlock",
    "Session",
    "StopReason",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Turn",
    "TurnStatus",
    "TurnStopReason",
    "Usage",
    "UserBlock",
]
