"""``/api/chat``: ``useChat`` (AI SDK 5, 6 and 7) talks to a turnstream session.

* ``POST /api/chat`` takes the body ``useChat`` posts. The chat ``id`` is the caller's own
  name for a session (``named_sessions``); the session is created on first use and its id
  comes back as ``messageMetadata.session_id``. When the last message is the user's, its
  text and its ``file`` parts (images and PDFs in ``data:`` URLs) start a turn; while the
  chat's turn is open, they steer it instead (``steering.py``: queued for its next step, or
  the reason for denying the calls waiting for approval), and the stream says so in a
  transient ``data-turnstream-steering`` chunk. Where the new turn goes in the session's tree
  (docs/branches.md) is read from the conversation the client sends along
  (``branch_point``): a message after an edited or shortened history follows the last turn
  the history agrees with, and ``regenerate()`` (``trigger: "regenerate-message"``,
  ``messageId`` the answer's, which is its turn's id) answers that turn's message again
  beside it; both start a branch (409 while a turn is open), never steer. When the last
  message is the assistant's, its tool parts that carry an answer (a client tool's
  ``output-available`` / ``output-error``; from 6 on, an approval's ``approval-responded``
  with ``approval.approved`` and ``approval.reason``) answer the session's waiting turn,
  which then continues in the same assistant message. Client tools are declared in the body
  (``client_tools``, e.g. through the transport's ``body``).
* ``GET /api/chat/{chat_id}/stream`` is what ``useChat({resume: true})`` calls: the chat's
  open turn (running, or waiting for the client) from its first event, stored ones first and
  then live, from whichever process runs it; ``204`` when no turn is open (or no such chat).
* ``POST /api/chat/{chat_id}/stop`` cancels the open turn. A client that only drops its
  connection (the AI SDK's ``stop()`` aborts the fetch) does not stop the turn: that is what
  lets a reload resume it.

The version the client speaks is read by ``aisdk_request.requested_version``; whether steps
stream live (the default) or whole, by ``turn_stream.requested_steps``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from starlette.responses import JSONResponse, Response

from ..blocks import Attachment, Session, Turn, UserBlock
from ..branches import ROOT
from ..errors import ContentRejected
from ..lifecycle import pending_requests
from .aisdk import STEERING_PART, UIMessageStreamEncoder, Version, chunks_response, ui_stream_response
from .aisdk_request import (
    FILE_FIELDS,
    VERSION_PARAMS,
    Answer,
    answers,
    file_parts,
    message_text,
    requested_version,
    said,
)
from .api import API, OVERLOADED, Call, Reply
from .branch_point import branch_point, follow
from .errors import ApiError, conflict, invalid_field, not_found
from .follow import Follower
from .models import ID_PATTERN, CancelOut, ChatRequest
from .named_sessions import find_named_session, named_session_id, open_named_session, open_turn
from .routes_turns import checked_and_stored, client_tool_specs, refusal, start_turn, submit
from .steering import steer
from .turn_stream import (
    STEPS_HEADER,
    STEPS_PARAMS,
    STEPS_QUERY,
    StepsMode,
    notebook_feed,
    requested_steps,
    whole_turn,
    with_notebook,
)

SSE = "text/event-stream"
VERSION_HEADER = {"X-AI-SDK-Version": "The major of the `ai` package that reads the stream: 5 (default), 6 or 7.",
                  **STEPS_HEADER}
VERSION_QUERY = {"ai_sdk": "Same as X-AI-SDK-Version, for a transport whose headers you do not set.", **STEPS_QUERY}
_ID = re.compile(ID_PATTERN)
PARAMS = {**VERSION_PARAMS, **STEPS_PARAMS, "chat_id": {"type": "string", "pattern": ID_PATTERN},
          "thread_id": {"type": "string", "pattern": ID_PATTERN}}
"""The schemas of the chat and AG-UI routes' parameters."""


def chat_session_id(user_id: str, chat_id: str) -> str:
    """The session a user's chat id names: the same for the same user, unrelated for another."""
    return named_session_id(user_id, chat_id, "chat")


def path_name(call: Call, param: str) -> str:
    """A chat or thread id from the path; 422 naming it when it cannot be one."""
    value = call.param(param)
    if not _ID.fullmatch(value):
        raise invalid_field(["path", param], "must be 1 to 64 letters, digits, '_' or '-'")
    return value


async def _continue(call: Call, session: Session, body: ChatRequest) -> tuple[Follower, set[str], set[str]]:
    """Record the answers the last (assistant) message carries and continue the waiting
    turn; returns its follower, the calls the user denied, and every call decided here."""
    state = call.state
    last_index = len(body.messages) - 1
    turn = await open_turn(call, session)
    if turn is None or turn.status != "awaiting_client":
        raise conflict("no turn of this chat is waiting for tool results; send a user message")
    pending = await pending_requests(state.store, turn)
    given: list[Answer] = []
    offered = answers(body.messages[-1], ("body", "messages", last_index))
    offered += [Answer(("body", "approvals", i), a.tool_use_id, approved=a.approved, reason=a.reason)
                for i, a in enumerate(body.approvals or ())]
    for a in offered:
        req = pending.get(a.call_id)
        if req is None or (a.approved is True and req.executor == "client") or any(g.call_id == a.call_id
                                                                                  for g in given):
            continue  # settled before, not this turn's, a client tool approved but not run yet, or twice
        given.append(a)
    if not given:
        raise conflict(f"turn {turn.id} waits for tool results, and the last message answers none of its calls")
    ready = False
    # Outputs first: the client has them, so the stream starts after them. Decisions after:
    # a denial's result is part of the stream (as tool-output-denied).
    for a in (a for a in given if a.approved is None):
        ready = await submit(state, session, turn, a.call_id, content=a.content, is_error=a.is_error,
                             approved=None, field_prefix=a.field)
    before = await state.store.last_event_n(turn.id)
    decisions = [a for a in given if a.approved is not None]
    for a in decisions:
        ready = await submit(state, session, turn, a.call_id, content=None, is_error=False, approved=a.approved,
                             reason=a.reason, field_prefix=a.field, decided_by=call.user.name)
    if not ready:
        raise conflict(f"turn {turn.id} still waits for other tool results; send them together")
    follower = Follower(state.store, state.bus, session.id, turn.id, before,
                        ping_interval=state.settings.ping_interval)
    await state.turns.resume(session, turn.id)
    return follower, {a.call_id for a in decisions if not a.approved}, {a.call_id for a in decisions}


@API.route("POST", "/api/chat", summary="AI SDK UI message stream (useChat 5, 6, 7): a chat id is a session",
           body=ChatRequest, headers=VERSION_HEADER, query=VERSION_QUERY, params=PARAMS,
           replies={200: Reply("UI message stream v1 chunks, then [DONE].", None, SSE),
                    409: Reply("A turn of the chat is open and the message would start another branch (an edited "
                               "conversation, regenerate), which is never steered into it; or the turn cannot take "
                               "the message or the answers sent (docs/aisdk.md)."),
                    **OVERLOADED})
async def chat(call: Call) -> Response:
    state = call.state
    body = call.parsed(ChatRequest)
    version = requested_version(call, body.messages)
    steps = requested_steps(call)
    last = body.messages[-1]
    last_field: list[str | int] = ["body", "messages", len(body.messages) - 1]
    if last.role == "user" and not message_text(last).strip():
        raise invalid_field([*last_field, "parts"], "the message has no text part")
    if last.role not in ("user", "assistant"):
        raise invalid_field([*last_field, "role"],
                            "the last message must be the user's (or the assistant's, carrying tool results)")
    try:
        media, media_index = file_parts(last, tuple(last_field)) if last.role == "user" else ([], [])
    except ContentRejected as exc:
        raise refusal(exc, FILE_FIELDS) from None
    title = next((message_text(m) for m in body.messages if m.role == "user"), "")
    session = await open_named_session(call, body.id, "chat", title=title, model=body.model, toolset=body.toolset,
                                       model_field=["body", "model"])
    meta = {"session_id": session.id}
    feed = notebook_feed(state, session)  # before the turn moves: its first change may come at once
    try:
        if last.role == "user":
            specs = client_tool_specs(state, session, body.client_tools)
            refs = await checked_and_stored(state, media, [*last_field, "parts"], media_index,
                                            FILE_FIELDS) if media else []
            branch = await _branch(call, session, body)
            if branch is not None:
                follower = await _start_branch(call, session, branch, message_text(last), specs, refs)
            else:
                started = await _start_or_steer(call, session, message_text(last), specs, refs)
                if not isinstance(started, Follower):
                    if feed is not None:
                        feed.close()
                    return await _steered(call, session, started, version, steps, meta)
                follower = started
            encoder = UIMessageStreamEncoder(version=version, message_id=follower.turn_id, metadata=meta, steps=steps)
        else:
            follower, denied, decided = await _continue(call, session, body)
            known = {p.toolCallId for p in last.parts if p.toolCallId is not None}
            encoder = UIMessageStreamEncoder(version=version, message_id=last.id or None, known_calls=known,
                                             denied=denied, decided=decided, metadata=meta, steps=steps)
    except BaseException:
        if feed is not None:
            feed.close()
        raise
    items = with_notebook(follower.batches(), feed)
    return ui_stream_response(items, encoder, headers={"X-Turn-Id": follower.turn_id})


async def _branch(call: Call, session: Session, body: ChatRequest) -> tuple[str, Turn | None] | None:
    """Where the chat's new user message goes when not simply after the current leaf
    (docs/aisdk.md, branches): the turn it follows (``ROOT``: none), and for ``regenerate()``
    of a turn's answer, that turn. None: after the current leaf, as before branches (a turn
    that is open may then take the message: steering)."""
    messages = body.messages
    history = messages[:-1]
    regenerate = body.trigger == "regenerate-message"
    # sendMessage({text, messageId}): the message replaces the one of that id, and what followed it goes
    edited = not regenerate and body.messageId is not None and body.messageId == messages[-1].id
    leaf = session.current_leaf
    if leaf is None or not (history or regenerate or edited):
        return None
    answers = [m.id for m in history if m.role == "assistant"]
    if not (regenerate or edited) and answers and answers[-1] == leaf:
        return None  # the chat shows the current leaf's answer last: the ordinary next message
    turns = await call.state.store.list_turns(session.id)
    again = next((t for t in turns if t.id == body.messageId), None) if regenerate else None
    if again is not None:
        return again.parent_turn_id or ROOT, again
    if regenerate or edited:  # the history is the whole conversation before the message (none: a first one)
        reached = follow(turns, leaf, said(history))  # never steered into an open turn: a new one, or 409
        return (reached.id if reached is not None else ROOT), None
    parent = branch_point(turns, leaf, said(history))
    return (parent, None) if parent is not None else None


async def _start_branch(call: Call, session: Session, branch: tuple[str, Turn | None], text: str,
                        specs: list[dict[str, Any]] | None, refs: Sequence[Attachment]) -> Follower:
    """A turn after ``branch``'s parent: the new message, or the regenerated turn's own input,
    files and client tools (unless the request declares its own); 409 while a turn is open."""
    parent, again = branch
    if again is not None:
        text = again.input
        refs = [a for b in again.blocks if isinstance(b, UserBlock) and b.step == 0 for a in b.attachments]
        specs = specs or await call.state.store.client_tools(again.id) or None
    return await start_turn(call.state, session, text, specs, refs, parent)


async def _start_or_steer(call: Call, session: Session, text: str, specs: list[dict[str, Any]] | None,
                          refs: Sequence[Attachment]) -> Follower | tuple[dict[str, Any], int]:
    """A new turn's follower; or, when the chat's turn is open, the message given to it
    (docs/steering.md) and the number of the turn's last event before that."""
    state = call.state
    for _ in range(2):  # a turn that ends between the two tries is followed by a new one
        try:
            return await start_turn(state, session, text, specs, refs)
        except ApiError as exc:
            if exc.status != 409:
                raise
        turn = await open_turn(call, session)
        before = await state.store.last_event_n(turn.id) if turn is not None else 0
        steered = await steer(state, session, text, refs)
        if steered is not None:
            return steered.model_dump(), before if turn is not None and turn.id == steered.turn_id else 0
    raise conflict("the chat's turn is still open; try again")


async def _steered(call: Call, session: Session, steered: tuple[dict[str, Any], int], version: Version,
                   steps: StepsMode, meta: dict[str, Any]) -> Response:
    """The answer to a message that steered the open turn: the transient steering chunk; when
    it denied the waiting calls, then the turn going on, as a new assistant message."""
    outcome, before = steered
    lead = [{"type": STEERING_PART, "data": outcome, "transient": True}]
    if outcome["outcome"] == "queued":  # the stream that follows the turn shows its answer
        return chunks_response(lead)
    state = call.state
    follower = Follower(state.store, state.bus, session.id, outcome["turn_id"], before,
                        ping_interval=state.settings.ping_interval)
    encoder = UIMessageStreamEncoder(version=version, metadata=meta, steps=steps, lead=lead)
    return ui_stream_response(with_notebook(follower.batches(), notebook_feed(state, session)), encoder,
                              headers={"X-Turn-Id": follower.turn_id})


@API.route("GET", "/api/chat/{chat_id}/stream",
           summary="Resume a chat's open turn (useChat resume): the whole message, stored events then live",
           headers=VERSION_HEADER, query=VERSION_QUERY, params=PARAMS,
           replies={200: Reply("UI message stream v1 chunks of the open turn from its start, then [DONE].", None,
                               SSE),
                    204: Reply("No turn of this chat is open: nothing to resume.")})
async def chat_stream(call: Call) -> Response:
    state = call.state
    chat_id = path_name(call, "chat_id")
    version = requested_version(call)
    steps = requested_steps(call)
    session = await find_named_session(call, chat_id, "chat")
    turn = await open_turn(call, session) if session is not None else None
    if session is None or turn is None:
        return Response(status_code=204)
    encoder = UIMessageStreamEncoder(version=version, message_id=turn.id, metadata={"session_id": session.id},
                                     steps=steps)
    items = with_notebook(whole_turn(state, session.id, turn.id), notebook_feed(state, session))
    return ui_stream_response(items, encoder, headers={"X-Turn-Id": turn.id})


@API.route("POST", "/api/chat/{chat_id}/stop",
           summary="Stop a chat's open turn (a dropped connection does not stop it)", params=PARAMS,
           replies={200: Reply("Cancelled, or being cancelled by the process that runs it.", CancelOut),
                    204: Reply("No turn of this chat is open: nothing to stop.")})
async def chat_stop(call: Call) -> Response:
    return await stop_named(call, path_name(call, "chat_id"), "chat")


async def stop_named(call: Call, name: str, kind: str) -> Response:
    """Cancel the open turn of the caller's chat or thread ``name``."""
    session = await find_named_session(call, name, "agui" if kind == "agui" else "chat")
    if session is None:
        raise not_found(f"{kind} {name}")
    turn = await open_turn(call, session)
    outcome = await call.state.turns.cancel(session.id, turn.id) if turn is not None else None
    if turn is None or outcome is None:
        return Response(status_code=204)
    return JSONResponse({"turn_id": turn.id, "status": outcome})


__all__ = ["chat_session_id", "path_name", "stop_named"]
