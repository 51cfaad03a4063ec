"""Who is calling, and what they may see.

HTTP: ``Authorization: Bearer <api key>``. WebSocket (browsers cannot set headers there):
the key as a subprotocol — offer ``["turnstream", "turnstream.key.<api key>"]`` and the
server selects ``turnstream``; offer the key alone and it selects none, as it never answers
with a subprotocol the client did not offer — or, for clients that can, the ``Authorization``
header.
Never in the URL: a query string ends up in access logs and proxies' logs.

Every id a user names is checked against the user: a session of someone else, or a turn of
another session, is answered exactly as one that does not exist (404), so ids leak nothing.
"""

from __future__ import annotations

import re
import time

from starlette.datastructures import Headers

from ..blocks import Session, Turn
from ..store import Store, User
from ..store.keys import hash_key
from .errors import not_found, unauthorized

KEY_SUBPROTOCOL = "turnstream.key."
SUBPROTOCOL = "turnstream"
_CACHE_TTL = 60.0
_CACHE_MAX = 4096
ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,200}$"
"""What a session's or a turn's id can be; any other is answered as one that does not exist."""
_ID = re.compile(ID_PATTERN)


class Authenticator:
    """Key -> user, with a short cache so a busy client does not cost a query per request."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[str, tuple[float, User]] = {}

    async def user(self, key: str | None) -> User | None:
        if not key or len(key) > 512:
            return None
        h = hash_key(key)
        hit = self._cache.get(h)
        now = time.monotonic()
        if hit is not None and now - hit[0] < _CACHE_TTL:
            return hit[1]
        user = await self.store.user_by_key(key)
        if user is not None:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[h] = (now, user)
        return user

    async def require(self, headers: Headers) -> User:
        user = await self.user(bearer_key(headers))
        if user is None:
            raise unauthorized()
        return user


def bearer_key(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def websocket_key(headers: Headers) -> tuple[str | None, bool]:
    """The key a WebSocket handshake carries, and whether it came as a subprotocol."""
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    for p in offered:
        if p.startswith(KEY_SUBPROTOCOL):
            return p[len(KEY_SUBPROTOCOL):], True
    return bearer_key(headers), False


async def owned_session(store: Store, user: User, session_id: str, *, with_turns: bool = False) -> Session:
    session = await store.get_session(session_id, with_turns=with_turns) if _ID.fullmatch(session_id) else None
    if session is None or session.user_id != user.id:
        raise not_found(f"session {session_id}")
    return session


async def owned_turn(store: Store, session: Session, turn_id: str) -> Turn:
    turn = await store.get_turn(turn_id) if _ID.fullmatch(turn_id) else None
    if turn is None or turn.session_id != session.id:
        raise not_found(f"turn {turn_id}")
    return turn


__all__ = ["ID_PATTERN", "KEY_SUBPROTOCOL", "SUBPROTOCOL", "Authenticator", "bearer_key", "owned_session", "owned_turn",
           "websocket_key"]
