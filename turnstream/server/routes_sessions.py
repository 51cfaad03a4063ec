"""Sessions: create, list, read (with turns and blocks), switch the branch shown
(docs/branches.md), delete."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from ..agents_config import team_problem
from ..blocks import BLOCK_ADAPTER, Session, Turn
from .api import API, Call, Reply
from .auth import owned_session
from .errors import conflict, invalid_field
from .models import CurrentIn, Deleted, SessionCreate, SessionDetail, SessionList, SessionOut


def session_json(s: Session) -> dict[str, Any]:
    d: dict[str, Any] = {"id": s.id, "title": s.title, "model": s.model, "toolset": s.toolset,
                         "created_at": s.created_at, "current_leaf": s.current_leaf}
    if s.agents is not None:
        d["agents"] = s.agents
        d["current_agent"] = s.current_agent
    return d


def turn_json(t: Turn) -> dict[str, Any]:
    d = t.model_dump(mode="json", exclude={"blocks", "step_usage"})
    d["blocks"] = [BLOCK_ADAPTER.dump_python(b, mode="json", exclude_none=True) for b in t.blocks]
    return d


@API.route("POST", "/api/sessions", summary="Create a session", body=SessionCreate,
           replies={201: Reply("The new session.", SessionOut)})
async def create_session(call: Call) -> Response:
    body = call.parsed(SessionCreate)
    if body.model:
        problem = call.state.check_model(body.model)
        if problem is not None:
            raise invalid_field(["body", "model"], problem)
    if body.agents is not None:
        problem_at = team_problem(body.agents)
        if problem_at is not None:
            raise invalid_field(["body", "agents", *problem_at[0]], problem_at[1])
        for i, a in enumerate(body.agents):
            problem = call.state.check_model(a.model) if a.model else None
            if problem is not None:
                raise invalid_field(["body", "agents", i, "model"], problem)
    agents, current = call.state.session_agents(body.agents)
    s = await call.state.store.create_session(
        call.user.id, title=body.title, model=body.model or call.state.settings.model, toolset=body.toolset,
        agents=agents, current_agent=current)
    return JSONResponse(session_json(s), status_code=201)


@API.route("GET", "/api/sessions", summary="The caller's sessions",
           replies={200: Reply("Sessions, oldest first.", SessionList)})
async def list_sessions(call: Call) -> Response:
    sessions = await call.state.store.list_sessions(call.user.id)
    return JSONResponse({"sessions": [session_json(s) for s in sessions]})


@API.route("GET", "/api/sessions/{session_id}", summary="A session with its turns and blocks",
           replies={200: Reply("The session.", SessionDetail)})
async def get_session(call: Call) -> Response:
    s = await owned_session(call.state.store, call.user, call.param("session_id"), with_turns=True)
    return JSONResponse({**session_json(s), "turns": [turn_json(t) for t in s.turns]})


@API.route("PUT", "/api/sessions/{session_id}/current", summary="Switch the branch the session shows",
           body=CurrentIn, replies={200: Reply("The session, its current_leaf the turn given; a new turn follows it "
                                               "(docs/branches.md).", SessionOut)})
async def set_current(call: Call) -> Response:
    body = call.parsed(CurrentIn)
    s = await owned_session(call.state.store, call.user, call.param("session_id"))
    await call.state.store.set_current_leaf(s.id, body.turn_id)
    # Every tab of the chat (on any process) shows the branch now shown.
    call.state.bus.publish_message(s.id, {"type": "session", "session_id": s.id, "current_leaf": body.turn_id})
    return JSONResponse(session_json(s.model_copy(update={"current_leaf": body.turn_id})))


@API.route("DELETE", "/api/sessions/{session_id}", summary="Delete a session (its open turn is cancelled first)",
           replies={200: Reply("Deleted.", Deleted)})
async def delete_session(call: Call) -> Response:
    state = call.state
    s = await owned_session(state.store, call.user, call.param("session_id"), with_turns=True)
    for t in s.turns:
        if t.status in ("running", "awaiting_client"):
            outcome = await state.turns.cancel(s.id, t.id)
            if outcome == "cancelling":
                raise conflict(f"turn {t.id} is still running in another process; it was asked to stop, "
                               "try again in a moment")
    if state.notebooks is not None:
        await state.notebooks.close_notebook(s.id)
    deleted = await state.store.delete_session(s.id)
    return JSONResponse({"deleted": deleted})
