"""The images and files of a session's messages and tool results, by content hash.

Blobs are stored once for everyone (``Store.put_blob``); a session may read only those its own
turns refer to, so a hash seen elsewhere is a 404 here, like another user's session."""

from __future__ import annotations

import re

from starlette.responses import Response

from ..blocks import Attachment, Session, ToolResultBlock, UserBlock
from .api import API, Call, Reply
from .auth import owned_session
from .errors import not_found

_SHA256 = re.compile(r"[0-9a-f]{64}")


def session_attachments(session: Session) -> dict[str, Attachment]:
    """Every attachment the session's stored turns refer to, by hash."""
    found: dict[str, Attachment] = {}
    for turn in session.turns:
        for block in turn.blocks:
            if isinstance(block, UserBlock | ToolResultBlock):
                for a in block.attachments:
                    found.setdefault(a.sha256, a)
    return found


@API.route("GET", "/api/sessions/{session_id}/blobs/{sha256}",
           params={"sha256": {"type": "string", "pattern": f"^{_SHA256.pattern}$"}},
           summary="An image or file of this session's messages or tool results, by its SHA-256",
           replies={200: Reply("The bytes, with their media type.", None, "application/octet-stream"),
                    404: Reply("No such session, or no turn of it refers to this hash (or not yours).")})
async def get_blob(call: Call) -> Response:
    state = call.state
    session = await owned_session(state.store, call.user, call.param("session_id"), with_turns=True)
    sha = call.param("sha256")
    ref = session_attachments(session).get(sha) if _SHA256.fullmatch(sha) else None
    data = (await state.store.get_blobs([sha])).get(sha) if ref is not None else None
    if ref is None or data is None:
        raise not_found(f"blob {sha} in session {session.id}")
    return Response(data, media_type=ref.media_type, headers={
        "Cache-Control": "private, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"})
