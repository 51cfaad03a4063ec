"""WebSocket ``/ws/sessions/{id}``: every open tab of a session sees its turns live and its
notebook change.

Handshake: the ``Origin`` must be one of the server's own or of the allowed origins
(``TURNSTREAM_ALLOWED_ORIGINS``), and the API key must be valid and own the session. The
key comes as the subprotocol ``turnstream.key.<key>`` or as an ``Authorization`` header, never
in the URL. The server answers with a subprotocol the client offered or with none (RFC 6455):
``turnstream`` when it was offered (browsers offer it beside the key), else none; it never
selects the key, which would echo it back. A refused
handshake is answered with HTTP 403 (origin), 401 (key) or 404 (session), before any
upgrade.

The server's own origins are judged without trusting the request's ``Host`` (a DNS
rebinding page controls both ``Host`` and ``Origin``): an ``Origin`` whose host is an IP
address or ``localhost`` and whose port is the server's passes, since no DNS name is
involved; any name (``chat.example.com``, a proxy in front) must be listed in
``TURNSTREAM_ALLOWED_ORIGINS``. A client that sends no ``Origin`` is not a browser (no page
can open a WebSocket without one) and passes; it still needs a key.

Messages, server to client (JSON text frames):

* ``{"type": "hello", "session_id", "notebook": <notebook_state or null>}`` on connect;
* ``{"type": "event", "session_id", "turn_id", "id": "<turn_id>:<n>", "n", "event", "data"}``
  for every event of every turn of the session (the SSE event as JSON);
* the notebook's own messages (``{"type": "notebook", …}`` for a cell's change and
  ``{"type": "notebook_files", …}`` for the data files, see ``NotebookManager``), whoever made
  the change: the assistant's tools or a user's notebook routes;
* ``{"type": "session", "session_id", "title"}`` when the session gets a title (``titles.py``);
* ``{"type": "pong"}`` in answer to ``{"type": "ping"}`` (a message that is not JSON, or nests
  deeper than ``json_depth.MAX_DEPTH``, is ignored);
* ``{"type": "reconnect"}`` when the server stops, before it closes the socket (code 1012).

This channel is live only: a tab that reconnects reads what it missed with
``GET /api/sessions/{id}`` and the events route.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

import orjson
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..bus import EndOfStream, Envelope, SessionMessage, Wake
from ..events import Reconnect
from ..json_depth import too_deep
from .auth import SUBPROTOCOL, owned_session, websocket_key
from .errors import ApiError
from .state import AppState

log = logging.getLogger("turnstream.server.ws")


def origin_allowed(origin: str | None, port: int, allowed: tuple[str, ...]) -> bool:
    """Whether a WebSocket handshake from ``origin`` may proceed (see the module doc)."""
    if not origin:
        return True
    if origin.rstrip("/") in allowed or "*" in allowed:
        return True
    try:
        parts = urlsplit(origin)
        origin_port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or origin_port != port or not host:
        return False
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False  # a DNS name: only when configured
    return True


def event_message(env: Envelope) -> bytes:
    return b"".join((b'{"type":"event","session_id":', orjson.dumps(env.session_id), b',"turn_id":',
                     orjson.dumps(env.turn_id), b',"id":', orjson.dumps(env.event_id), b',"n":',
                     str(env.n).encode(), b',"event":', orjson.dumps(env.name), b',"data":', env.json, b"}"))


async def _refuse(ws: WebSocket, status: int, code: str, message: str) -> None:
    try:
        await ws.send_denial_response(JSONResponse({"error": code, "message": message}, status_code=status))
    except RuntimeError:  # the server cannot send an HTTP answer to a handshake: plain close
        await ws.close(code=1008, reason=message[:120])


async def session_socket(ws: WebSocket) -> None:
    state: AppState = ws.app.state.turnstream
    session_id = str(ws.path_params["session_id"])
    if not origin_allowed(ws.headers.get("origin"), state.settings.port, state.settings.allowed_origins):
        await _refuse(ws, 403, "forbidden_origin", f"origin {ws.headers.get('origin')} is not allowed")
        return
    key, _ = websocket_key(ws.headers)
    user = await state.auth.user(key)
    if user is None:
        await _refuse(ws, 401, "unauthorized",
                      "a valid API key is required (the turnstream.key.<key> subprotocol, or an Authorization header)")
        return
    try:
        await owned_session(state.store, user, session_id)
    except ApiError as exc:
        await _refuse(ws, exc.status, exc.code, exc.message)
        return
    sub = state.bus.subscribe_session(session_id)
    try:
        offered = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",")]
        await ws.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        await sub.ready()  # other processes' changes reach us before the state is read
        notebook: dict[str, Any] | None = None
        if state.notebooks is not None:
            notebook = await state.notebooks.state(session_id)
        await ws.send_text(orjson.dumps({"type": "hello", "session_id": session_id, "notebook": notebook}).decode())
        async with asyncio.TaskGroup() as tg:
            reader = tg.create_task(_read(ws))
            tg.create_task(_forward(ws, state, sub, reader))
    except* (WebSocketDisconnect, ConnectionError, RuntimeError) as group:
        log.debug("websocket of session %s ended: %r", session_id, group.exceptions[0])
    finally:
        sub.close()


async def _read(ws: WebSocket) -> None:
    """Answer pings; return when the client closes."""
    while True:
        msg = await ws.receive()
        if msg["type"] == "websocket.disconnect":
            return
        raw = msg.get("text") or msg.get("bytes") or b""
        try:
            doc = None if too_deep(raw) else orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict) and doc.get("type") == "ping":
            await ws.send_text('{"type":"pong"}')


async def _forward(ws: WebSocket, state: AppState, sub: Any, reader: asyncio.Task[None]) -> None:
    """Send bus items until the client goes (the reader ends), then stop."""
    last: dict[str, int] = {}
    while not reader.done():
        getter = asyncio.ensure_future(sub.get())
        done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
        if getter not in done:
            getter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await getter
            return
        item = getter.result()
        if isinstance(item, Envelope):
            if item.n > last.get(item.turn_id, 0):
                last[item.turn_id] = item.n
                await ws.send_text(event_message(item).decode())
        elif isinstance(item, SessionMessage):
            await ws.send_text(orjson.dumps(item.data).decode())
        elif isinstance(item, EndOfStream):  # the server stops: the tab reconnects (elsewhere)
            await ws.send_text(orjson.dumps({"type": Reconnect.name}).decode())
            await ws.close(code=1012)  # "service restart"
            return
        elif isinstance(item, Wake):  # an event too large for a notification: read it from the store
            for ev in await state.store.events_after(item.turn_id, last.get(item.turn_id, 0)):
                env = Envelope.stored(item.session_id, ev)
                last[item.turn_id] = env.n
                await ws.send_text(event_message(env).decode())
