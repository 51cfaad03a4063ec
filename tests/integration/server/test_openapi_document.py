"""What schemathesis found the document and the server disagreeing on (issue 27, item 11), one
assertion each, so a regression names itself without a fuzzing run."""

from __future__ import annotations

import re
from typing import Any

from tests.support.server import Server, new_session, run_turn


def _params(doc: dict[str, Any], path: str, method: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p["schema"] for p in doc["paths"][path][method].get("parameters", [])}


def test_a_method_a_path_does_not_take_is_405_allowing_exactly_its_methods(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        for path, allow in (("/api/sessions", "POST, GET"), (f"/api/sessions/{sid}", "GET, DELETE"),
                            (f"/api/sessions/{sid}/notebook.ipynb", "GET, POST")):
            r = c.request("OPTIONS", path)
            assert r.status_code == 405, (path, r.text)
            assert sorted(r.headers["allow"].split(", ")) == sorted(allow.split(", ")), (path, r.headers)


def test_parameters_say_what_the_server_takes(server: Server) -> None:
    with server.client() as c:
        doc = c.get("/openapi.json").json()
    name = _params(doc, "/api/sessions/{session_id}/notebook/files/{name}", "delete")["name"]["pattern"]
    assert re.fullmatch(name, "sales.csv") and not re.fullmatch(name, "0") and not re.fullmatch(name, "a..b.csv")
    stream = _params(doc, "/api/chat/{chat_id}/stream", "get")
    assert stream["chat_id"]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    assert re.fullmatch(stream["ai_sdk"]["pattern"], "v6.0.326") and not re.fullmatch(stream["ai_sdk"]["pattern"], "8")
    assert re.fullmatch(stream["steps"]["pattern"], "WHOLE") and not re.fullmatch(stream["steps"]["pattern"], "half")
    events = _params(doc, "/api/sessions/{session_id}/turns/{turn_id}/events", "get")
    assert re.fullmatch(events["Last-Event-ID"]["pattern"], "turn_1:4") and not re.fullmatch(
        events["last_event_id"]["pattern"], "four")


def test_bodies_are_declared_as_they_are(server: Server) -> None:
    with server.client() as c:
        doc = c.get("/openapi.json").json()
    events = doc["paths"]["/api/sessions/{session_id}/turns/{turn_id}/events"]["get"]["responses"]["200"]
    assert events["content"]["text/event-stream"]["schema"]["type"] == "object"  # one event, not a string
    ipynb = doc["paths"]["/api/sessions/{session_id}/notebook.ipynb"]
    assert ipynb["get"]["responses"]["200"]["content"]["application/x-ipynb+json"]["schema"]["type"] == "object"
    assert "413" in ipynb["post"]["responses"] and "413" in doc["paths"]["/api/chat"]["post"]["responses"]
    assert doc["paths"]["/api/sessions"]["post"]["requestBody"]["required"] is False  # {} is the default
    assert doc["paths"]["/api/sessions/{session_id}/turns"]["post"]["requestBody"]["required"] is True


def test_a_last_event_id_of_another_turn_is_404_and_one_that_is_no_id_422(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c)
        run_turn(c, sid, "hi")
        tid = c.get(f"/api/sessions/{sid}").json()["turns"][0]["id"]
        url = f"/api/sessions/{sid}/turns/{tid}/events"
        assert c.get(url, headers={"Last-Event-ID": "turn_other:2"}).status_code == 404
        assert c.get(url, params={"last_event_id": "two"}).status_code == 422
        assert c.get(url, headers={"Last-Event-ID": f"{tid}:2"}).status_code == 200
