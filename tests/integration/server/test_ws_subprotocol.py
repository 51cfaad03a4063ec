"""The WebSocket's subprotocol (issue 27, item 3): the server answers with one the client
offered, or with none (RFC 6455, section 4.1), so a strict client (the ``websockets``
package refuses a handshake that selects a subprotocol it did not offer) connects however it
carries its key."""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.support.server import Server, new_session


@pytest.mark.parametrize(("offered", "selected"), [
    (["turnstream", "turnstream.key.{key}"], "turnstream"),
    (["turnstream.key.{key}"], None),  # the key alone: nothing else to select
    (["chat.v2", "turnstream.key.{key}"], None),  # a protocol the server does not speak
    (["turnstream.key.{key}", "turnstream"], "turnstream"),
])
def test_the_server_selects_only_a_subprotocol_the_client_offered(server: Server, offered: list[str],
                                                                  selected: str | None) -> None:
    with server.client() as c:
        sid = new_session(c)
    url = server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
    protocols: Any = [p.format(key=server.key) for p in offered]
    with connect(url, subprotocols=protocols, open_timeout=10) as ws:
        assert ws.subprotocol == selected
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"


def test_a_client_with_the_key_in_a_header_and_no_subprotocol_gets_none(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
    url = server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
    with connect(url, additional_headers={"Authorization": f"Bearer {server.key}"}, open_timeout=10) as ws:
        assert ws.subprotocol is None
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
