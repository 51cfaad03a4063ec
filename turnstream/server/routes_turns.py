"""Turns: start one (SSE), follow or resume its events, answer its tool requests, cancel it."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from ..blocks import Session, Turn
from ..errors import InvalidValue, NotFound, TurnConflictError
from ..lifecycle import submit_tool_result
from .api import API, OVERLOADED, Call, Reply
from .auth import owned_session, owned_turn
from .errors import ApiError, conflict, invalid_field, not_found
from .follow import Follower
from .models import CancelOut, ClientTool, ToolResultIn, ToolResultOut, TurnCreate
from .sse_encoder import parse_last_event_id, sse_response
from .state import AppState

SSE = "text/event-stream"


def client_tool_specs(state: AppState, session: Session, tools: list[ClientTool] | None,
                      field: str = "client_tools") -> list[dict[str, Any]] | None:
    """The declared client tools as the runner takes them; 422 when one shadows a server tool."""
    if not tools:
        return None
    server = {t.name for t in state.config_for(session).tools}
    for i, t in enumerate(tools):
        if t.name in server:
            raise invalid_field(["body", field, i, "name"], f"{t.name!r} is already a server tool of this session")
    return [t.model_dump() for t in tools]


async def start_turn(state: AppState, session: Session, message: str,
                     client_tools: list[dict[str, Any]] | None) -> Follower:
    if not session.title:  # before the turn's events, so every tab learns the title first
        await state.titles.first_message(session.id, message)
    try:
        turn_id, sub = await state.turns.start(session, message, client_tools)
    except TurnConflictError as exc:
        raise conflict(f"turn {exc.turn_id} is still open in this session (running or waiting for tool "
                       "results); wait for it, answer it, or cancel it") from None
    return Follower(state.store, state.bus, session.id, turn_id, 0, sub=sub,
                    ping_interval=state.settings.ping_interval)


@API.route("POST", "/api/sessions/{session_id}/turns", summary="Send a message: the turn's events stream back",
           body=TurnCreate,
           replies={200: Reply("The turn's events (SPEC §8) until turn_complete.", None, SSE), **OVERLOADED})
async def create_turn(call: Call) -> Response:
    state = call.state
    body = call.parsed(TurnCreate)
    session = await owned_session(state.store, call.user, call.param("session_id"))
    follower = await start_turn(state, session, body.message, client_tool_specs(state, session, body.client_tools))
    return sse_response(follower.batches(), headers={
        "X-Turn-Id": follower.turn_id,
        "Location": f"/api/sessions/{session.id}/turns/{follower.turn_id}/events"})


@API.route("GET", "/api/sessions/{session_id}/turns/{turn_id}/events",
           summary="A turn's events: stored ones after Last-Event-ID, then live ones",
           headers={"Last-Event-ID": "<turn_id>:<n> of the last event received; replay starts after it."},
           query={"last_event_id": "Same as the Last-Event-ID header (for clients that cannot set headers)."},
           replies={200: Reply("The turn's events until turn_complete.", None, SSE)})
async def turn_events(call: Call) -> Response:
    state = call.state
    session = await owned_session(state.store, call.user, call.param("session_id"))
    turn = await owned_turn(state.store, session, call.param("turn_id"))
    after = 0
    raw = call.request.headers.get("last-event-id")
    where = "header"
    if raw is None:
        raw, where = call.request.query_params.get("last_event_id"), "query"
    if raw is not None and raw.strip():
        parsed = parse_last_event_id(raw, turn.id)
        if parsed is None:
            name = "Last-Event-ID" if where == "header" else "last_event_id"
            raise invalid_field([where, name], f"must be '{turn.id}:<n>' (the id of an event of this turn)")
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
                 field_prefix: tuple[Any, ...] = ("body",)) -> bool:
    """Record one answer and publish what it stored (a result block, or the approval);
    True when the turn can continue. The core's refusals become 4xx by their type; an
    invalid answer is a 422 naming its field under ``field_prefix``."""
    try:
        return await submit_tool_result(state.store, turn.id, tool_use_id, content=content, is_error=is_error,
                                        approved=approved, reason=reason,
                                        on_event=lambda ev: state.bus.publish(session.id, ev))
    except NotFound:
        raise not_found(f"pending tool call {tool_use_id} in turn {turn.id}") from None
    except InvalidValue as exc:
        raise invalid_field([*field_prefix, exc.field], str(exc)) from None


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
                         approved=body.approved, reason=body.reason)
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


__all__ = ["ApiError", "client_tool_specs", "start_turn", "submit"]
