"""Sessions that a client names itself: an AI SDK chat id, an AG-UI thread id.

Such a name belongs to the caller: the session's id is a hash of the caller's user id, the
protocol and the name (``named_session_id``), so two users may both name a chat ``x`` and
neither can reach, or claim first, the other's. A name another user chose is, to the
caller, just a name of its own that does not exist yet. The session is created on first
use (``open_named_session``); the routes that only read or stop (``find_named_session``)
never create one.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from ..blocks import Session, Turn
from ..errors import AlreadyExists
from .api import Call
from .errors import invalid_field, not_found
from .models import Toolset

Kind = Literal["chat", "agui"]
OPEN = ("running", "awaiting_client")


def named_session_id(user_id: str, name: str, kind: Kind = "chat") -> str:
    """The session a user's name designates: the same for the same user, unrelated for another.
    (``chat`` ids keep the form they had before AG-UI threads joined them.)"""
    if kind == "chat":
        return "chat_" + hashlib.sha256(f"{user_id}\x00{name}".encode()).hexdigest()[:32]
    return f"{kind}_" + hashlib.sha256(f"{user_id}\x00{kind}\x00{name}".encode()).hexdigest()[:32]


async def find_named_session(call: Call, name: str, kind: Kind) -> Session | None:
    """The caller's session of that name, or None (never another user's)."""
    session = await call.state.store.get_session(named_session_id(call.user.id, name, kind))
    return session if session is not None and session.user_id == call.user.id else None


async def open_named_session(call: Call, name: str, kind: Kind, *, title: str, model: str | None,
                             toolset: Toolset | None, model_field: list[str | int]) -> Session:
    """The caller's session of that name, created with ``model`` and ``toolset`` when new."""
    state, store = call.state, call.state.store
    sid = named_session_id(call.user.id, name, kind)
    session = await store.get_session(sid)
    if session is None:
        if model:
            problem = state.check_model(model)
            if problem is not None:
                raise invalid_field(model_field, problem)
        agents, current = state.session_agents(None)
        try:
            session = await store.create_session(call.user.id, session_id=sid, title=title[:80],
                                                 model=model or state.settings.model, toolset=toolset,
                                                 agents=agents, current_agent=current)
        except AlreadyExists:  # created by a concurrent request
            session = await store.get_session(sid)
    if session is None or session.user_id != call.user.id:
        raise not_found(f"{kind} {name}")
    return session


async def open_turn(call: Call, session: Session) -> Turn | None:
    """The session's open turn (running, or waiting for the client), if any."""
    turns = [t for t in await call.state.store.list_turns(session.id) if t.status in OPEN]
    return turns[-1] if turns else None


__all__ = ["OPEN", "Kind", "find_named_session", "named_session_id", "open_named_session", "open_turn"]
