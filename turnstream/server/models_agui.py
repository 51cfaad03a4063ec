"""Request bodies of the AG-UI endpoint (``POST /api/ag-ui``): the protocol's ``RunAgentInput``
and its parts, checked at the door with the same rules as every other body (``models.py``).
The protocol's objects are open (``extra="allow"``): fields this server does not read are kept,
not refused."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from ..storable import Text
from .models import ID_PATTERN, storable_json


class AguiTool(BaseModel):
    """A tool of ``RunAgentInput.tools``: a frontend tool, which the client runs (a client tool)."""

    model_config = ConfigDict(extra="allow")

    name: Annotated[str, Field(pattern=ID_PATTERN, description="Tool name as the model sees it.")]
    description: Text = Field(default="", max_length=10_000)
    parameters: dict[str, Any] | None = Field(default=None, description="JSON Schema (an object schema) of its input.")

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None and v.get("type", "object") != "object":
            raise ValueError("must be a JSON Schema of type 'object'")
        return None if v is None else dict(storable_json(v))


class AguiInputContent(BaseModel):
    """A part of a message's content (AG-UI ``InputContent``): ``text`` with its text (a string),
    or ``binary`` (not read here)."""

    model_config = ConfigDict(extra="allow")

    type: Annotated[str, Field(min_length=1, max_length=100)]
    text: Text | None = Field(default=None, max_length=500_000)

    @model_validator(mode="after")
    def _text_has_text(self) -> AguiInputContent:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs its text (a string)")
        return self


def _content_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "parts"
    return "object" if isinstance(value, dict) else None


AguiContent = Annotated[Annotated[str, Tag("text")] | Annotated[list[AguiInputContent], Tag("parts")]
                        | Annotated[dict[str, Any], Tag("object")], Discriminator(_content_kind)]
"""A message's content: a string, a list of parts, or (activity messages) an object; an error
names the one the value is (``content.parts[0].text``) rather than every form it is not."""


class AguiMessage(BaseModel):
    """A message of ``RunAgentInput.messages`` (AG-UI ``Message``). The thread's history lives
    on the server: a run reads the last user message, and ``tool`` messages that answer the
    calls the thread waits for."""

    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(min_length=1, max_length=200)]
    role: Literal["developer", "system", "assistant", "user", "tool", "activity", "reasoning"]
    content: AguiContent | None = None
    toolCallId: str | None = Field(default=None, max_length=200)
    error: Text | None = Field(default=None, max_length=100_000)


class AguiContext(BaseModel):
    model_config = ConfigDict(extra="allow")

    description: Text = Field(max_length=10_000)
    value: Text = Field(max_length=100_000)


class AguiResume(BaseModel):
    """An answer to an interrupt (``RunAgentInput.resume``). For an approval: status
    ``resolved`` with ``payload`` ``{"approved": bool, "reason"?: str}``; ``cancelled`` denies."""

    model_config = ConfigDict(extra="allow")

    interruptId: Annotated[str, Field(min_length=1, max_length=200)]
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class RunAgentInputIn(BaseModel):
    """AG-UI ``RunAgentInput``: what ``HttpAgent`` posts. ``threadId`` names a session of the
    caller's own (as an AI SDK chat id does); ``forwardedProps`` may carry ``model`` and
    ``toolset`` for a new thread. ``state`` is not read: the thread's state (its notebook) is
    the server's, sent back as ``STATE_SNAPSHOT``."""

    model_config = ConfigDict(extra="allow")

    threadId: Annotated[str, Field(pattern=ID_PATTERN, description="The thread, the caller's own name for a "
                                                                   "session.")]
    runId: Annotated[str, Field(min_length=1, max_length=200)]
    parentRunId: str | None = Field(default=None, max_length=200)
    protocolVersion: str | None = Field(default=None, max_length=50)
    state: Any = None
    messages: list[AguiMessage] = Field(default_factory=list, max_length=10_000)
    tools: list[AguiTool] = Field(default_factory=list, max_length=128)
    context: list[AguiContext] = Field(default_factory=list, max_length=128)
    forwardedProps: Any = None
    resume: list[AguiResume] | None = Field(default=None, max_length=128)

    @field_validator("messages")
    @classmethod
    def _storable_messages(cls, v: list[AguiMessage]) -> list[AguiMessage]:
        for m in v:
            storable_json(m.model_dump(include={"content"}).get("content"))
        return v

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, v: list[AguiTool]) -> list[AguiTool]:
        names = [t.name for t in v]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"tool name {dup!r} is declared twice")
        return v
