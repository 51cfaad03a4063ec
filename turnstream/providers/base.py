"""The provider seam: a neutral request in, neutral stream events out.

An adapter (one per wire format) turns a ``ModelRequest`` into an HTTP call and yields the
events below, nothing more: it does not assemble blocks (``assemble.py`` does), decide to
loop (``loop.py``) or retry (``retry.py``). ``Provider.stream()`` returns an async iterator;
**the caller closes it** (``contextlib.aclosing``), and closing it releases the connection.
Adapters raise only ``ProviderError`` subclasses.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ..blocks import Attachment, Block, StopReason, TextBlock, ToolResultBlock, Usage, UserBlock

BlockKind: TypeAlias = Literal["text", "thinking", "redacted_thinking", "tool_use", "provider"]
DeltaKind: TypeAlias = Literal["text", "thinking", "signature", "input_json", "citation"]


@dataclass(slots=True)
class BlockOpened:
    """A block begins. ``key`` identifies it within the step (the vendor's index or id)."""

    key: int | str
    kind: BlockKind
    tool_use_id: str | None = None
    name: str | None = None
    data: dict[str, Any] | None = None
    """Initial payload: redacted thinking's ``data``, a provider block's JSON, a pre-filled input."""


@dataclass(slots=True)
class Delta:
    key: int | str
    kind: DeltaKind
    value: Any


@dataclass(slots=True)
class BlockClosed:
    """The block's end signal. A tool call is final only here."""

    key: int | str


@dataclass(slots=True)
class StepEnded:
    """The provider's final event arrived: the step is complete."""

    stop_reason: StopReason
    usage: Usage
    raw_stop_reason: str | None = None


ProviderEvent: TypeAlias = BlockOpened | Delta | BlockClosed | StepEnded


@dataclass(slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(slots=True)
class Message:
    """One provider-neutral message: a role and its blocks, in order."""

    role: Literal["user", "assistant"]
    blocks: list[Block | str] = field(default_factory=list)
    """Blocks; a plain ``str`` is user text."""


def user_parts(message: Message) -> tuple[list[ToolResultBlock], str, list[Attachment]]:
    """A user message as the OpenAI formats need it: its tool results (in order), its text
    joined into one string ("" when it has none), and its images and files, in order."""
    results = [b for b in message.blocks if isinstance(b, ToolResultBlock)]
    texts = [b if isinstance(b, str) else b.text for b in message.blocks
             if isinstance(b, str | TextBlock | UserBlock) and (b if isinstance(b, str) else b.text)]
    media = [a for b in message.blocks if isinstance(b, UserBlock) for a in b.attachments]
    return results, "\n\n".join(texts), media


def media_of(req: ModelRequest, ref: Attachment) -> bytes | None:
    """The bytes of an attachment of the request (None when the store had none)."""
    return req.media.get(ref.sha256)


def missing(ref: Attachment) -> str:
    """The text sent in place of an attachment whose bytes are gone."""
    return f"[{ref.media_type} {ref.name or ref.sha256[:12]} is no longer available]"


@dataclass(slots=True)
class OutputFormat:
    """A structured answer asked for (docs/structured-output.md): the final text must be one
    JSON document matching ``schema``. Each adapter sends it as its API's own option."""

    name: str
    schema: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
    model: str
    """The model name without its provider prefix."""
    messages: list[Message]
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: Literal["auto", "none"] = "auto"
    max_tokens: int = 8192
    thinking_budget: int | None = None
    media: dict[str, bytes] = field(default_factory=dict)
    """The bytes of every attachment the messages refer to, by SHA-256."""
    output: OutputFormat | None = None
    cache_key: str | None = None
    """OpenAI's ``prompt_cache_key``: requests that share it (and a prefix) are routed to the
    same prompt cache. The loop sends one per session; Anthropic marks breakpoints instead."""


class Provider(Protocol):
    """Streams one step. Implementations: anthropic, openai_chat, openai_responses, scripted."""

    name: str
    """The provider prefix: ``anthropic``, ``openai``, ``openai-responses``, ``scripted``."""
    model: str

    @property
    def origin(self) -> str:
        """``provider:model``; thinking blocks are replayed only to the same origin."""
        ...

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        """Yield the step's events; end with exactly one ``StepEnded`` or raise ProviderError."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP client. Always safe to call."""
        ...
