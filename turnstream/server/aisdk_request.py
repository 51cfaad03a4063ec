"""Reading what ``useChat`` sends: which major of the ``ai`` package speaks, the user's text,
the conversation before it (where the new message goes: ``branch_point``), and the answers
an assistant message carries back (client tools' outputs, approvals).

Which version: the transport does not say, so the client does, in this order:

1. the header ``X-AI-SDK-Version`` (``5``, ``6``, ``7``, or a full version such as
   ``6.0.326``), which ``DefaultChatTransport({headers})`` sends on every request, the
   resume ``GET`` included;
2. the query parameter ``ai_sdk`` on the route (``api: '/api/chat?ai_sdk=7'``; the
   transport keeps a query when it builds the resume URL);
3. otherwise 6 when a message carries a tool approval (only 6 and later have them), else 5.

5 is the default because its chunks are the ones every later major reads too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from ..content import MediaPart, decode_base64, part_of
from ..errors import ContentRejected
from .aisdk import VERSIONS, Version
from .api import Call
from .branch_point import Said
from .errors import invalid_field
from .models import UIMessageIn, UIPartIn

HEADER = "x-ai-sdk-version"
QUERY = "ai_sdk"
VERSION_PATTERN = "^(v?([567])(\\.[0-9A-Za-z.+-]*)?)?$"
_VERSION = re.compile(r"v?([567])(\.[0-9A-Za-z.+-]*)?")
VERSION_PARAMS = {name: {"type": "string", "pattern": VERSION_PATTERN} for name in ("X-AI-SDK-Version", QUERY)}
"""Their schemas: ``5``, ``6``, ``7`` or a full version (``v6.0.326``); empty is the default."""
_APPROVAL_STATES = ("approval-requested", "approval-responded", "output-denied")


def requested_version(call: Call, messages: list[UIMessageIn] | None = None) -> Version:
    """The major the client speaks (see the module doc); 422 naming the header or the query
    parameter for one that is not 5, 6 or 7."""
    for where, name, raw in (("header", "X-AI-SDK-Version", call.request.headers.get(HEADER)),
                             ("query", QUERY, call.request.query_params.get(QUERY))):
        if not raw:
            continue
        found = _VERSION.fullmatch(raw)
        if found is None:
            raise invalid_field([where, name], f"must be one of {', '.join(map(str, VERSIONS))} (the major of the "
                                               f"`ai` package, or its full version), not {raw!r}")
        return next(v for v in VERSIONS if str(v) == found.group(1))
    for m in messages or ():
        if any(tool_part_name(p) is not None and (p.state in _APPROVAL_STATES or p.approval is not None)
               for p in m.parts):
            return 6
    return 5


def message_text(message: UIMessageIn) -> str:
    return "".join(p.text or "" for p in message.parts if p.type == "text")


def said(messages: Sequence[UIMessageIn]) -> list[Said]:
    """The user messages of a conversation, each with the ids of the assistant messages that
    answer it (the server names an answer's message after its turn)."""
    out: list[tuple[str, set[str]]] = []
    for m in messages:
        if m.role == "user":
            out.append((message_text(m), set()))
        elif m.role == "assistant" and out and m.id:
            out[-1][1].add(m.id)
    return [Said(text, frozenset(named)) for text, named in out]


FILE_FIELDS = {"media_type": "mediaType", "data": "url"}
"""The AI SDK's names for what ``content.check_parts`` names a part's type and bytes."""


def file_parts(message: UIMessageIn, where: tuple[str | int, ...]) -> tuple[list[MediaPart], list[int]]:
    """The ``file`` parts of a user message (``{type: "file", mediaType, url, filename?}``, the
    bytes in a ``data:`` URL) as content parts, and their positions among its parts; 422
    naming ``mediaType`` or ``url`` (under ``where``) for one that carries no bytes."""
    media: list[MediaPart] = []
    index: list[int] = []
    for i, p in enumerate(message.parts):
        if p.type != "file":
            continue
        field: list[str | int] = [*where, "parts", i]
        media_type, url, name = p.mediaType, p.url, p.filename
        if not media_type:
            raise ContentRejected([*field, "mediaType"], "a file part needs its mediaType")
        if url is None or not url.startswith("data:") or ";base64," not in url[:200]:
            raise ContentRejected([*field, "url"], "must be a data: URL holding the bytes in base64 "
                                                   "(data:<type>;base64,…); other URLs are not fetched")
        data = decode_base64(url, [*field, "url"])
        media.append(part_of(media_type, data, name or None))
        index.append(i)
    return media, index


def tool_part_name(part: UIPartIn) -> str | None:
    """The tool name of a tool part (``tool-<name>`` or ``dynamic-tool``), else None."""
    if part.type.startswith("tool-"):
        return part.type[len("tool-"):]
    if part.type == "dynamic-tool":
        return part.toolName or ""
    return None


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer an assistant message carries for a call of the waiting turn."""

    field: tuple[str | int, ...]
    """Where it came from (for a 422 naming it): a message part, or ``body.approvals[i]``."""
    call_id: str
    content: str | None = None
    is_error: bool = False
    approved: bool | None = None
    """Set for an approval decision (6+): the part is ``approval-responded`` or ``output-denied``."""
    reason: str | None = None


def answers(message: UIMessageIn, where: tuple[str | int, ...]) -> list[Answer]:
    """The tool parts of ``message`` (found at ``where``) that answer a call: a client tool's
    output (``output-available`` / ``output-error``), or an approval decision."""
    out: list[Answer] = []
    for i, p in enumerate(message.parts):
        field = (*where, "parts", i)
        call_id = p.toolCallId
        if tool_part_name(p) is None or call_id is None:
            continue
        state, approval = p.state, p.approval
        if state in ("approval-responded", "output-denied") and approval is not None and approval.approved is not None:
            out.append(Answer(field, call_id, approved=approval.approved, reason=approval.reason))
        elif state == "output-error":
            out.append(Answer(field, call_id, content=p.errorText or "error", is_error=True))
        elif state == "output-available":
            value = (p.model_extra or {}).get("output")
            out.append(Answer(field, call_id,
                              content=value if isinstance(value, str) else orjson.dumps(value).decode()))
    return out


__all__ = ["FILE_FIELDS", "HEADER", "QUERY", "Answer", "answers", "file_parts", "message_text", "requested_version",
           "said", "tool_part_name"]
