"""Sessions, auth, validation and the documents the server serves."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
import pytest

from tests.support.server import Server, new_session, run_turn


def test_healthz_and_openapi(server: Server) -> None:
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/healthz").json()["status"] == "ok"
        doc = c.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    for path, method in [("/api/sessions", "post"), ("/api/sessions", "get"), ("/api/sessions/{session_id}", "get"),
                         ("/api/sessions/{session_id}", "delete"), ("/api/sessions/{session_id}/turns", "post"),
                         ("/api/sessions/{session_id}/turns/{turn_id}/events", "get"),
                         ("/api/sessions/{session_id}/tool-results", "post"),
                         ("/api/sessions/{session_id}/turns/{turn_id}/cancel", "post"), ("/api/chat", "post")]:
        assert method in paths[path], (path, method)
    schemas = doc["components"]["schemas"]
    body = paths["/api/sessions/{session_id}/turns"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/TurnCreate"}
    assert "message" in schemas["TurnCreate"]["required"]
    assert "client_tools" in schemas["TurnCreate"]["properties"]
    assert {"tool_use_id", "content", "is_error", "approved"} <= set(schemas["ToolResultIn"]["properties"])


def test_index_is_served(server: Server) -> None:
    with httpx.Client(base_url=server.url) as c:
        r = c.get("/")
    assert r.status_code == 200
    assert "text/html" in r.headers["content-type"]


def test_session_lifecycle(server: Server) -> None:
    with server.client() as c:
        sid = new_session(c, title="First")
        assert sid in [s["id"] for s in c.get("/api/sessions").json()["sessions"]]
        events = run_turn(c, sid, "hello there")
        assert events[-1].event == "turn_complete"
        detail = c.get(f"/api/sessions/{sid}").json()
        assert detail["title"] == "First"
        [turn] = detail["turns"]
        assert turn["input"] == "hello there"
        assert turn["status"] == "complete"
        assert turn["blocks"][0] == {"type": "text", "text": "You said: hello there", "seq": 0, "step": 1}
        assert c.delete(f"/api/sessions/{sid}").json() == {"deleted": True}
        assert c.get(f"/api/sessions/{sid}").status_code == 404


@pytest.mark.parametrize("auth", [None, "Basic dXNlcjpwdw==", "Bearer ts_not_a_key", "Bearer " + "x" * 600])
def test_no_valid_key_is_401(server: Server, auth: str | None) -> None:
    with server.client() as owner:
        sid = new_session(owner)
    headers = {} if auth is None else {"Authorization": auth}
    with httpx.Client(base_url=server.url, headers=headers) as c:
        for method, path in [("GET", "/api/sessions"), ("POST", "/api/sessions"), ("GET", f"/api/sessions/{sid}"),
                             ("POST", f"/api/sessions/{sid}/turns"), ("POST", "/api/chat"),
                             ("POST", f"/api/sessions/{sid}/tool-results")]:
            r = c.request(method, path, json={})
            assert r.status_code == 401, (method, path, r.text)
            assert r.json()["error"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"


def test_another_users_ids_are_404(server: Server, other_key: str) -> None:
    with server.client() as owner:
        sid = new_session(owner)
        events = run_turn(owner, sid, "mine")
        tid = events[0].data["turn_id"]
    with server.client(other_key) as c:
        assert c.get("/api/sessions").json()["sessions"] == []
        checks = [("GET", f"/api/sessions/{sid}", None), ("DELETE", f"/api/sessions/{sid}", None),
                  ("POST", f"/api/sessions/{sid}/turns", {"message": "hi"}),
                  ("GET", f"/api/sessions/{sid}/turns/{tid}/events", None),
                  ("POST", f"/api/sessions/{sid}/turns/{tid}/cancel", None),
                  ("POST", f"/api/sessions/{sid}/tool-results", {"tool_use_id": "toolu_x"})]
        for method, path, body in checks:
            r = c.request(method, path, json=body)
            assert r.status_code == 404, (method, path, r.text)
        # A chat id is the caller's own name: Bob naming Alice's session gets a chat of his own,
        # and Alice's session is not touched (tests/integration/security has the full case).
        r = c.post("/api/chat", json={"id": sid, "messages": [{"role": "user", "parts": [
            {"type": "text", "text": "hi"}]}]})
        assert r.status_code == 200 and f'"session_id":"{sid}"' not in r.text
        # Bob's own session: Alice's turn id under it is still not found.
        bob_sid = new_session(c)
        assert c.get(f"/api/sessions/{bob_sid}/turns/{tid}/events").status_code == 404
    with server.client() as owner:
        mine = owner.get(f"/api/sessions/{sid}")
        assert mine.status_code == 200 and [t["input"] for t in mine.json()["turns"]] == ["mine"]


def test_every_session_route_in_the_openapi_is_404_for_another_user(server: Server, other_key: str) -> None:
    # Not a list written by hand: every route /openapi.json names under a session, with every
    # method, so that a route added later without its ownership check fails here. A body that
    # fails validation (422) is refused the same way for a session that does not exist.
    with server.client() as owner:
        sid = new_session(owner)
        tid = run_turn(owner, sid, "mine")[0].data["turn_id"]
        spec = owner.get("/openapi.json").json()
    fill = {"session_id": sid, "id": sid, "turn_id": tid, "cell_id": "c1", "name": "a.csv",
            "sha256": "0" * 64, "tool_use_id": "toolu_x"}
    tried = []
    with server.client(other_key) as c:
        for path, methods in spec["paths"].items():
            if not path.startswith("/api/sessions/{"):
                continue
            url = path.format(**fill)
            for method in methods:
                if method.upper() not in ("GET", "POST", "PATCH", "DELETE", "PUT"):
                    continue
                r = c.request(method.upper(), url, json={})
                # Indistinguishable from a session that does not exist (no oracle), and never served
                none = c.request(method.upper(), path.format(**{**fill, "session_id": "ses_none", "id": "ses_none"}),
                                 json={})
                tried.append((method, path))
                assert r.status_code in (404, 422), (method, path, r.status_code, r.text[:200])
                assert (r.status_code, r.text.replace(sid, "ses_none")) == (none.status_code, none.text), (
                    method, path)
    assert len(tried) >= 15, tried  # the notebook, files, audit, blobs, turns … all came through here
    with server.client() as owner:
        assert [t["input"] for t in owner.get(f"/api/sessions/{sid}").json()["turns"]] == ["mine"]


@pytest.mark.parametrize(("content", "field"), [
    (b"{not json", "body"),
    (b"", "body.message"),
    (b"[]", "body"),
    (b'{"message": ""}', "body.message"),
    (b'{"message": 5}', "body.message"),
    (b'{"message": "hi", "extra": 1}', "body.extra"),
    (b'{"message": "a\\u0000b"}', "body.message"),
    (b'{"message": "hi", "client_tools": [{"name": "bad name!"}]}', "body.client_tools[0].name"),
    (b'{"message": "hi", "client_tools": [{"name": "t", "input_schema": {"type": "array"}}]}',
     "body.client_tools[0].input_schema"),
    (b'{"message": "hi", "client_tools": [{"name": "calculator"}]}', "body.client_tools[0].name"),
])
def test_bad_turn_input_is_422_naming_the_field(server: Server, models: dict[str, str], content: bytes,
                                                field: str) -> None:
    with server.client() as c:
        sid = new_session(c, toolset="calculator")
        r = c.post(f"/api/sessions/{sid}/turns", content=content, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "validation_error"
    assert body["message"].startswith(field + ":") or body["message"].startswith(field + " "), body["message"]


def test_bad_session_input_is_422(server: Server) -> None:
    with server.client() as c:
        r = c.post("/api/sessions", json={"model": "nope"})
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.model:")
        r = c.post("/api/sessions", json={"toolset": "everything"})
        assert r.status_code == 422
        assert r.json()["message"].startswith("body.toolset:")
        r = c.post("/api/sessions", json={"title": 3})
        assert r.json()["detail"][0]["loc"] == ["body", "title"]


def test_a_session_cannot_make_the_server_read_a_file_of_its_choosing(server: Server, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"steps": [{"blocks": [{"type": "text", "text": "leaked"}]}]}')
    with server.client() as c:
        for model in (f"scripted:{outside}", "scripted:../../etc/passwd", "scripted:x.json"):
            r = c.post("/api/sessions", json={"model": model})
            assert r.status_code == 422, r.text
            assert "scenario files are not allowed" in r.json()["message"]
        assert c.post("/api/sessions", json={"model": "scripted:echo"}).status_code == 201  # built-in


def test_unknown_routes_and_methods_are_clean(server: Server) -> None:
    with server.client() as c:
        r = c.get("/api/nothing")
        assert r.status_code == 404
        assert r.json()["error"] == "not_found"
        r = c.put("/api/sessions")
        assert r.status_code == 405
        assert r.json()["error"] == "method_not_allowed"
        assert c.get("/api/sessions/a%00b").status_code == 404
