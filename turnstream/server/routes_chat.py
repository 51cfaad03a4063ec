"""``POST /api/chat``: ``useChat`` (AI SDK 5+) talks to a turnstream session.

The chat ``id`` is the caller's own name for a session: the session's id is made from the
caller's user id and the chat id (``chat_session_id``), so two users may both call a chat
``x`` and neither can reach, or claim first, the other's. The session is created on first
use; its id comes back as ``messageMetadata.session_id`` for the session routes.
When the last message is the user's, its text starts a turn. When it is the assistant's,
its tool parts that carry an answer (``output-available`` / ``output-error``) answer the
session's waiting turn, which then continues in the same assistant message. Client tools
are declared in the request body (``client_tools``, e.g. through the transport's
``body`` option), as for ``POST /api/sessions/{id}/turns``. Approvals are answered with
``POST /api/sessions/{id}/tool-results``.
"""

from __future__ import annotations

import hashlib

from starlette.responses import Response

from ..blocks import Session, ToolResultBlock, ToolUseBlock
from ..errors import AlreadyExists
from .aisdk import UIMessageStreamEncoder, answer_content, message_text, tool_answers, ui_stream_response
from .api import API, OVERLOADED, Call, Reply
from .errors import conflict, invalid_field, not_found
from .follow import Follower
from .models import ChatRequest
from .routes_turns import client_tool_specs, start_turn, submit
from .state import AppState


def chat_session_id(user_id: str, chat_id: str) -> str:
    """The session a user's chat id names: the same for the same user, unrelated for another."""
    return "chat_" + hashlib.sha256(f"{user_id}\x00{chat_id}".encode()).hexdigest()[:32]


async def _chat_session(call: Call, body: ChatRequest) -> Session:
    state, store = call.state, call.state.store
    sid = chat_session_id(call.user.id, body.id)
    session = await store.get_session(sid)
    if session is None:
        if body.model:
            problem = state.check_model(body.model)
            if problem is not None:
                raise invalid_field(["body", "model"], problem)
        title = next((message_text(m) for m in body.messages if m.role == "user"), "")[:80]
        try:
            session = await store.create_session(call.user.id, session_id=sid, title=title,
                                                 model=body.model or state.settings.model, toolset=body.toolset)
        except AlreadyExists:  # created by a concurrent request
            session = await store.get_session(sid)
    if session is None or session.user_id != call.user.id:
        raise not_found(f"chat {body.id}")
    return session


async def _continue(state: AppState, session: Session, body: ChatRequest) -> tuple[Follower, str]:
    last = body.messages[-1]
    answers = tool_answers(last)
    open_turns = [t for t in await state.store.list_turns(session.id) if t.status in ("running", "awaiting_client")]
    turn = open_turns[-1] if open_turns else None
    if turn is None or turn.status != "awaiting_client":
        raise conflict("no turn of this chat is waiting for tool results; send a user message")
    calls = {b.tool_use_id for b in turn.blocks if isinstance(b, ToolUseBlock)}
    answered = {b.tool_use_id for b in turn.blocks if isinstance(b, ToolResultBlock)}
    ready = False
    sent = 0
    for i, part in answers:
        call_id = str(part["toolCallId"])
        if call_id not in calls or call_id in answered:
            continue
        content, is_error = answer_content(part)
        ready = await submit(state, session, turn, call_id, content=content, is_error=is_error, approved=None,
                             field_prefix=("body", "messages", len(body.messages) - 1, "parts", i))
        sent += 1
    if sent == 0:
        raise conflict(f"turn {turn.id} waits for tool results, and the last message answers none of its calls")
    if not ready:
        raise conflict(f"turn {turn.id} still waits for other tool results; send them together")
    before = await state.store.last_event_n(turn.id)
    follower = Follower(state.store, state.bus, session.id, turn.id, before,
                        ping_interval=state.settings.ping_interval)
    await state.turns.resume(session, turn.id)
    return follower, turn.id


@API.route("POST", "/api/chat", summary="AI SDK UI message stream (useChat): a chat id is a session",
           body=ChatRequest,
           replies={200: Reply("UI message stream v1 chunks, then [DONE].", None, "text/event-stream"), **OVERLOADED})
async def chat(call: Call) -> Response:
    state = call.state
    body = call.parsed(ChatRequest)
    session = await _chat_session(call, body)
    last = body.messages[-1]
    if last.role == "user":
        text = message_text(last)
        if not text.strip():
            raise invalid_field(["body", "messages", len(body.messages) - 1, "parts"], "the message has no text part")
        specs = client_tool_specs(state, session, body.client_tools)
        follower = await start_turn(state, session, text, specs)
        encoder = UIMessageStreamEncoder(message_id=follower.turn_id, metadata={"session_id": session.id})
    elif last.role == "assistant":
        follower, _ = await _continue(state, session, body)
        known = {str(p["toolCallId"]) for p in last.parts if isinstance(p.get("toolCallId"), str)}
        encoder = UIMessageStreamEncoder(message_id=last.id or None, known_calls=known,
                                         metadata={"session_id": session.id})
    else:
        raise invalid_field(["body", "messages", len(body.messages) - 1, "role"],
                            "the last message must be the user's (or the assistant's, carrying tool results)")
    return ui_stream_response(follower.batches(), encoder, headers={"X-Turn-Id": follower.turn_id})
