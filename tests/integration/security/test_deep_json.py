"""JSON nested past the limit (``json_depth.MAX_DEPTH``) at every door of a real server
(issue 27, item 1): a ``.ipynb`` import, request bodies, WebSocket messages. Each is a 422
naming the field (or ignored, on the WebSocket), never a 500, and the server logs no error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.support.server import Server, new_session, server_errors, start_server
from turnstream.json_depth import MAX_DEPTH

TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def deep_text(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("deep_json"), model="scripted:echo")
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


def test_an_ipynb_nested_a_hundred_thousand_deep_is_422_naming_the_notebook(server: Server) -> None:
    doc = '{"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": ' + deep_text(100_000) + '}, "cells": []}'
    with server.client() as c:
        sid = new_session(c)
        r = c.post(f"/api/sessions/{sid}/notebook.ipynb", content=doc.encode(),
                   headers={"Content-Type": "application/x-ipynb+json"})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "notebook"] and TOO_DEEP in r.json()["message"]
        assert c.get(f"/api/sessions/{sid}/notebook").json()["cells"] == []


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 100_000])
def test_a_body_past_the_limit_is_422_naming_the_body_on_every_json_route(server: Server, levels: int) -> None:
    """Past the limit, and past every parser's own limit: one answer."""
    schema = {"type": "object", "properties": {"x": {"default": None}}}
    text = json.dumps({"message": "hi", "client_tools": [{"name": "t", "input_schema": schema}]})
    body = text.replace("null", deep_text(levels)).encode()
    with server.client() as c:
        sid = new_session(c)
        for path in (f"/api/sessions/{sid}/turns", "/api/sessions", "/api/chat", "/api/ag-ui",
                     f"/api/sessions/{sid}/tool-results", f"/api/sessions/{sid}/notebook/cells"):
            r = c.post(path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (path, r.text)
            assert r.json()["detail"][0]["loc"] == ["body"] and TOO_DEEP in r.json()["message"], (path, r.text)
        assert c.get(f"/api/sessions/{sid}").json()["turns"] == []


def test_a_body_at_the_limit_is_read(server: Server) -> None:
    schema = {"type": "object", "properties": {"x": {"default": nested(MAX_DEPTH - 6)}}}  # 64 levels in all
    with server.client() as c:
        sid = new_session(c)
        r = c.post(f"/api/sessions/{sid}/turns", json={"message": "hi", "client_tools": [
            {"name": "t", "input_schema": schema}]})
        assert r.status_code in (200, 201), r.text


def test_a_deep_websocket_message_is_ignored_and_the_socket_stays(server: Server, tmp_path: Path) -> None:
    with server.client() as c:
        sid = new_session(c)
    url = server.url.replace("http://", "ws://") + f"/ws/sessions/{sid}"
    protocols: Any = ["turnstream", f"turnstream.key.{server.key}"]
    with connect(url, subprotocols=protocols, open_timeout=10, max_size=None) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
        ws.send('{"type": "ping", "x": ' + deep_text(100_000) + "}")
        ws.send('{"type": "ping", "x": ' + deep_text(MAX_DEPTH + 1) + "}")
        ws.send('{"type": "ping"}')
        assert json.loads(ws.recv(timeout=10)) == {"type": "pong"}  # one answer: the two deep ones were ignored
