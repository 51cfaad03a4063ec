"""The session WebSocket: live turn events and notebook changes for every open tab; the
key and the Origin are checked at the handshake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.support.server import Server, new_session, run_turn


def _ws_url(server: Server, sid: str, query: str = "") -> str:
    return server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}" + query


@contextmanager
def tab(server: Server, sid: str, key: str | None = None, **kw: Any) -> Iterator[ClientConnection]:
    k = server.key if key is None else key
    with connect(_ws_url(server, sid), subprotocols=["turnstream", f"turnstream.key.{k}"],  # type: ignore[list-item]
                 open_timeout=10, **kw) as ws:
        yield ws


def _recv_until(ws: ClientConnection, pred: Any) -> list[dict[str, Any]]:
    got = []
    while True:
        msg = json.loads(ws.recv(timeout=15))
        got.append(msg)
        if pred(msg):
            return got


def _is_end(msg: dict[str, Any]) -> bool:
    return msg.get("type") == "event" and msg["event"] == "turn_complete"


def test_every_tab_sees_turn_events_and_notebook_changes(server: Server, models: dict[str, str]) -> None:
    with server.client() as c:
        sid = new_session(c, model=models["notebook"], toolset="notebook")
        with tab(server, sid) as a, tab(server, sid, origin=server.url) as b:  # type: ignore[arg-type]
            assert a.subprotocol == "turnstream"
            for ws in (a, b):
                hello = json.loads(ws.recv(timeout=10))
                assert hello["type"] == "hello"
                assert hello["session_id"] == sid
                assert hello["notebook"]["type"] == "notebook_state"
            events = run_turn(c, sid, "make a cell")
            for ws in (a, b):
                msgs = _recv_until(ws, _is_end)
                turn_msgs = [m for m in msgs if m["type"] == "event"]
                stored_ids = [e.id for e in events if e.event != "block_delta"]
                assert [m["id"] for m in turn_msgs if m["event"] != "block_delta"] == stored_ids
                assert all(m["session_id"] == sid for m in turn_msgs)
                nb = [m for m in msgs if m["type"] == "notebook"]
                assert nb and nb[0]["change"] == "cell_created"
                assert nb[0]["cell"]["code"] == "x = 1 + 1"
            a.send(json.dumps({"type": "ping"}))
            assert json.loads(a.recv(timeout=10)) == {"type": "pong"}


def test_a_key_in_the_url_is_refused_and_never_logged(server: Server) -> None:
    """The key travels as a subprotocol or a header: a URL ends up in logs (and proxies' logs)."""
    with server.client() as c:
        sid = new_session(c)
    with pytest.raises(InvalidStatus) as err:
        connect(_ws_url(server, sid, f"?key={server.key}"), open_timeout=10)
    assert err.value.response.status_code == 401
    with connect(_ws_url(server, sid), additional_headers={"Authorization": f"Bearer {server.key}"},
                 open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
    assert server.key not in server.log_text()


@pytest.mark.parametrize(("case", "status"), [("no key", 401), ("bad key", 401), ("bad origin", 403),
                                              ("other user", 404), ("no session", 404)])
def test_handshake_refusals(server: Server, other_key: str, case: str, status: int) -> None:
    with server.client() as c:
        sid = new_session(c)
    url = _ws_url(server, sid)
    kw: dict[str, Any] = {"subprotocols": ["turnstream", f"turnstream.key.{server.key}"]}
    if case == "no key":
        kw = {}
    elif case == "bad key":
        kw["subprotocols"] = ["turnstream", "turnstream.key.ts_wrong"]
    elif case == "bad origin":
        kw["origin"] = "http://evil.example"
    elif case == "other user":
        kw["subprotocols"] = ["turnstream", f"turnstream.key.{other_key}"]
    elif case == "no session":
        url = _ws_url(server, "ses_doesnotexist")
    with pytest.raises(InvalidStatus) as err, connect(url, open_timeout=10, **kw):
        pass
    assert err.value.response.status_code == status


def test_configured_origin_is_allowed(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
    with tab(server, sid, origin="http://allowed.example") as ws:  # type: ignore[arg-type]
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
