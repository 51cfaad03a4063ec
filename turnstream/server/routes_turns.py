"""Turns: start one (SSE) after the current leaf or any earlier turn, regenerate one
(docs/branches.md), follow or resume its events, answer its tool requests, cancel it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.responses import JSONResponse, Response

from ..blocks import Attachment, Session, Turn, UserBlock
from ..branches import ROOT
from ..content import MediaPart, check_parts, decode_base64, part_of, store_parts
from ..errors import ContentRejected, InvalidValue, NotFound, TurnConflictError
from ..lifecycle import submit_tool_result
from ..tools.toolset import tool_names
from .api import API, OVERLOADED, Call, Reply
from .auth import owned_session, owned_turn
from .errors import ApiError, conflict, invalid_field, not_found, too_large
from .follow import Follower
from .models import CancelOut, ClientTool, PartIn, SteerOut, ToolResultIn, ToolResultOut, TurnCreate
from .sse_encoder import LAST_EVENT_ID, parse_last_event_id, sse_response
from .state import AppState
from .steering import steer
from .turn_form import FILE_FIELDS as FORM_FILE_FIELDS
from .turn_form import MULTIPART, read_turn_form

SSE = "text/event-stream"


def client_tool_specs(state: AppState, session: Session, tools: list[ClientTool] | None,
                      field: str = "client_tools") -> list[dict[str, Any]] | None:
    """The declared client tools as the runner takes them; 422 when one shadows a server tool."""
    if not tools:
        return None
    server = tool_names(state.config_for(session).tools)
    for i, t in enumerate(tools):
        if t.name in server:
            raise invalid_field(["body", field, i, "name"], f"{t.name!r} is already a server tool of this session")
    return [t.model_dump() for t in tools]


async def stored_parts(state: AppState, parts: Sequence[PartIn] | None,
                       field: tuple[str | int, ...] = ("body", "parts")) -> list[Attachment]:
    """A message's JSON parts decoded, checked against the server's limits and stored (413 or
    422 naming the part)."""
    if not parts:
        return []
    try:
        media = [part_of(p.media_type, decode_base64(p.data, [*field, i, "data"]), p.name)
                 for i, p in enumerate(parts)]
    except ContentRejected as exc:
        raise refusal(exc) from None
    return await checked_and_stored(state, media, field)


async def checked_and_stored(state: AppState, media: Sequence[MediaPart], field: Sequence[str | int],
                             index: Sequence[int] | None = None,
                             names: Mapping[str, str] | None = None) -> list[Attachment]:
    """Parts checked against the server's limits (``content.check_parts``: ``field`` and
    ``index`` say where each one was sent) and stored; ``names`` renames the checked field
    (``media_type``, ``data``) to the one the request used."""
    limits = state.limits()
    try:
        check_parts(media, max_bytes=limits.max_attachment_bytes, max_count=limits.max_attachments, field=field,
                    index=index)
    except ContentRejected as exc:
        raise refusal(exc, names) from None
    return await store_parts(state.store, media)


def refusal(exc: ContentRejected, names: Mapping[str, str] | None = None) -> ApiError:
    """A refused part as the answer: 413 with the field in its message, else 422 naming it."""
    loc = list(exc.field)
    if loc and isinstance(loc[-1], str) and names:
        loc[-1] = names.get(loc[-1], loc[-1])
    if exc.status == 413:
        return too_large(f"{'.'.join(str(f) for f in loc)}: {exc}")
    return invalid_field(loc, str(exc))


async def start_turn(state: AppState, session: Session, message: str,
                     client_tools: list[dict[str, Any]] | None, attachments: Sequence[Attachment] = (),
                     parent_turn_id: str | None = None) -> Follower:
    """Start a turn (after ``parent_turn_id``, else the current leaf: docs/branches.md) and
    follow it; 409 while the session has an open turn, on whichever branch."""
    if not session.title:  # before the turn's events, so every tab learns the title first
        await state.titles.first_message(session.id, message)
    try:
        turn_id, sub = await state.turns.start(session, message, client_tools, attachments=attachments,
                                               parent_turn_id=parent_turn_id)
    except TurnConflictError as exc:
        raise conflict(f"turn {exc.turn_id} is still open in this session (running or waiting for tool "
                       "results); wait for it, answer it, or cancel it") from None
    return Follower(state.store, state.bus, session.id, turn_id, 0, sub=sub,
                    ping_interval=state.settings.ping_interval)


@API.route("POST", "/api/sessions/{session_id}/turns", summary="Send a message: the turn's events stream back",
           body=TurnCreate, raw_body=MULTIPART,
           replies={200: Reply("The turn's events (docs/server.md, the event stream) until turn_complete.", None, SSE),
                    202: Reply("The session's turn was open: the message was queued for its next step, or "
                               "denied the calls waiting for approval (docs/steering.md).", SteerOut),
                    409: Reply("A turn of the session is open and parent_turn_id was given (a message for another "
                               "branch is not steered into it)."),
                    **OVERLOADED})
async def create_turn(call: Call) -> Response:
    state = call.state
    form = await read_turn_form(call) if call.body is None else None
    body = form[0] if form is not None else call.parsed(TurnCreate)
    session = await owned_session(state.store, call.user, call.param("session_id"))
    tools = client_tool_specs(state, session, body.client_tools)
    if form is not None:
        refs = await checked_and_stored(state, form[1], ["body", "files"], names=FORM_FILE_FIELDS)
    else:
        refs = await stored_parts(state, body.parts)
    branched = "parent_turn_id" in body.model_fields_set
    parent = (body.parent_turn_id or ROOT) if branched else None
    for _ in range(2):  # a turn that ends between the two tries is followed by a new one
        try:
            follower = await start_turn(state, session, body.message, tools, refs, parent)
            break
        except ApiError as exc:
            if exc.status != 409 or tools or branched:
                raise
            steered = await steer(state, session, body.message, refs)
            if steered is not None:
                return JSONResponse(steered.model_dump(), status_code=202)
    else:
        raise conflict("the session's turn is still open; try again")
    return _streamed(session, follower)


def _streamed(session: Session, follower: Follower) -> Response:
    return sse_response(follower.batches(), headers={
        "X-Turn-Id": follower.turn_id,
        "Location": f"/api/sessions/{session.id}/turns/{follower.turn_id}/events"})


@API.route("POST", "/api/sessions/{session_id}/turns/{turn_id}/regenerate",
           summary="Answer a turn's message again: a new turn beside it, its events stream back",
           replies={200: Reply("The new turn's events (docs/server.md, the event stream) until turn_complete; it "
                               "follows the same turn as turn_id, with the same message, parts and client tools "
                               "(docs/branches.md).", None, SSE),
                    409: Reply("A turn of the session is open (on whichever branch)."),
                    **OVERLOADED})
async def regenerate_turn(call: Call) -> Response:
    state = call.state
    session = await owned_session(state.store, call.user, call.param("session_id"))
    turn = await owned_turn(state.store, session, call.param("turn_id"))
    refs = [a for b in turn.blocks if isinstance(b, UserBlock) and b.step == 0 for a in b.attachments]
    tools = await state.store.client_tools(turn.id)
    follower = await start_turn(state, session, turn.input, tools or None, refs, turn.parent_turn_id or ROOT)
    return _streamed(session, follower)


@API.route("GET", "/api/sessions/{session_id}/turns/{turn_id}/events",
           summary="A turn's events: stored ones after Last-Event-ID, then live ones",
           headers={"Last-Event-ID": "<turn_id>:<n> of the last event received; replay starts after it."},
           query={"last_event_id": "Same as the Last-Event-ID header (for clients that cannot set headers)."},
           params={name: {"type": "string", "pattern": LAST_EVENT_ID} for name in ("Last-Event-ID", "last_event_id")},
           replies={200: Reply("The turn's events until turn_complete.", None, SSE),
                    404: Reply("No such session or turn (or not yours), or the Last-Event-ID names an event of "
                               "another turn.")})
async def turn_events(call: Call) -> Response:
    state = call.state
    session = await owned_session(state.store, call.user, call.param("session_id"))
    turn = await owned_turn(state.store, session, call.param("turn_id"))
    after = 0
    raw = call.request.headers.get("last-event-id")
    where = "header"
    if raw is None:
        raw, where = call.request.query_params.get("last_event_id"), "query"
    if raw:
        name = "Last-Event-ID" if where == "header" else "last_event_id"
        if re.fullmatch(LAST_EVENT_ID, raw) is None:
            raise invalid_field([where, name], f"must be '{turn.id}:<n>' (the id of an event of this turn)")
        parsed = parse_last_event_id(raw, turn.id)
        if parsed is None:
            raise not_found(f"event {raw} in turn {turn.id}")
        after = parsed
    follower = Follower(state.store, state.bus, session.id, turn.id, after, ping_interval=state.settings.ping_interval)
    return sse_response(follower.batches(), headers={"X-Turn-Id": turn.id})


async def _waiting_turn(state: AppState, session: Session, turn_id: str | None) -> Turn:
    if turn_id is not None:
        turn = await owned_turn(state.store, session, turn_id)
    else:
        open_turns = [t for t in await state.store.list_turns(session.id) if t.status in ("running", "awaiting_client")]
        if not open_turns:
            raise conflict("no turn of this session is waiting for tool results")
        turn = open_turns[-1]
    if turn.status != "awaiting_client":
        raise conflict(f"turn {turn.id} is not waiting for tool results (status: {turn.status})")
    return turn


async def submit(state: AppState, session: Session, turn: Turn, tool_use_id: str, *, content: str | None,
                 is_error: bool, approved: bool | None, reason: str | None = None,
                 field_prefix: tuple[Any, ...] = ("body",), decided_by: str = "user", always: bool = False) -> bool:
    """Record one answer and publish what it stored (a result block, or the approval);
    True when the turn can continue. The core's refusals become 4xx by their type; an
    invalid answer is a 422 naming its field under ``field_prefix``."""
    try:
        return await submit_tool_result(state.store, turn.id, tool_use_id, content=content, is_error=is_error,
                                        approved=approved, reason=reason, decided_by=decided_by, always=always,
                                        on_event=lambda ev: state.bus.publish(session.id, ev))
    except NotFound:
        raise not_found(f"pending tool call {tool_use_id} in turn {turn.id}") from None
    except InvalidValue as exc:
        raise invalid_field([*field_prefix, exc.field, *exc.path], str(exc)) from None


@API.route("POST", "/api/sessions/{session_id}/tool-results",
           summary="Answer a tool_request: a client tool's result, or an approval decision",
           body=ToolResultIn, replies={200: Reply("Recorded.", ToolResultOut)})
async def post_tool_result(call: Call) -> Response:
    state = call.state
    body = call.parsed(ToolResultIn)
    session = await owned_session(state.store, call.user, call.param("session_id"))
    turn = await _waiting_turn(state, session, body.turn_id)
    before = await state.store.last_event_n(turn.id)
    ready = await submit(state, session, turn, body.tool_use_id, content=body.content, is_error=body.is_error,
                         approved=body.approved, reason=body.reason, decided_by=call.user.name,
                         always=body.always)
    if ready:
        await state.turns.resume(session, turn.id)
    return JSONResponse({"turn_id": turn.id, "tool_use_id": body.tool_use_id, "resumed": ready,
                         "last_event_id": f"{turn.id}:{before}"})


@API.route("POST", "/api/sessions/{session_id}/turns/{turn_id}/cancel",
           summary="Cancel a turn: its stream and tools stop, dangling calls get is_error results",
           replies={200: Reply("Cancelled, or being cancelled by the process that runs it.", CancelOut)})
async def cancel_turn(call: Call) -> Response:
    state = call.state
    session = await owned_session(state.store, call.user, call.param("session_id"))
    turn = await owned_turn(state.store, session, call.param("turn_id"))
    outcome = await state.turns.cancel(session.id, turn.id)
    if outcome is None:
        current = await state.store.get_turn(turn.id)
        status = current.status if current else "deleted"
        raise conflict(f"turn {turn.id} is not running (status: {status})")
    return JSONResponse({"turn_id": turn.id, "status": outcome})


__all__ = ["ApiError", "checked_and_stored", "client_tool_specs", "refusal", "start_turn", "stored_parts",
           "submit"]
