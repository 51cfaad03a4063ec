"""schemathesis fuzzes every operation of ``/openapi.json`` (coverage, fuzzing and stateful
phases, bounded, a fixed seed) against a real server with all its checks: no 5xx, and the
document matches the server (every status, content type, header and body documented, every
schema-valid request taken and every schema-violating one refused, ``Allow`` on a 405 exact).
Where a route refuses a schema-valid request for a rule JSON Schema cannot carry, the
exception is in ``schemathesis.toml`` beside this file, with the rule.

One worker: with several, schemathesis' threads call ``ast.parse`` at once, which trips a
CPython 3.11 bug ("AST constructor recursion depth mismatch") inside hypothesis.

schemathesis draws integers from the schema, which bounds none of a free-form JSON field, and
it seldom draws one past 64 bits (which the JSON encoder and the databases refuse). So a second,
hypothesis-driven test hides such an integer somewhere in the free-form JSON of the routes that
take it, and asks for a 422 naming the field every time."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.server import Server, new_session, server_errors, start_server

CONFIG = Path(__file__).with_name("schemathesis.toml")


def test_the_openapi_document_matches_the_server_under_fuzzing(tmp_path: Path) -> None:
    srv = start_server(tmp_path, model="scripted:echo")
    try:
        exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or "schemathesis"
        out = subprocess.run(
            # Not ensure_resource_availability: its inferred links send one session's turn id with
            # another session, and the 404 that rightly follows reads to it as a lost resource.
            [exe, "--config-file", str(CONFIG), "run", f"{srv.url}/openapi.json", "--checks", "all",
             "--exclude-checks", "ensure_resource_availability",
             "-H", f"Authorization: Bearer {srv.key}", "--max-examples", "12", "--seed", "20240611",
             "--phases", "coverage,fuzzing,stateful", "--workers", "1", "--no-color", "--continue-on-failure",
             "--report-dir", str(tmp_path / "report")],
            capture_output=True, text=True, timeout=240, cwd=tmp_path)
    finally:
        srv.stop()
    assert out.returncode == 0, out.stdout[-12000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
    assert server_errors(srv) == []


WIDE = st.one_of(st.integers(min_value=2**64), st.integers(max_value=-(2**63) - 1))
"""Just past what fits in 64 bits (either way), and far past it."""
LETTERS = st.characters(categories=["L", "N"])
KEYS = st.text(LETTERS, min_size=1, max_size=8)
FITTING = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(LETTERS, max_size=8))


def _around(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``inner`` put into a list or an object among values that are fine."""
    in_list = st.tuples(st.lists(FITTING, max_size=3), inner, st.lists(FITTING, max_size=3)).map(
        lambda t: [*t[0], t[1], *t[2]])
    in_object = st.tuples(st.dictionaries(KEYS, FITTING, max_size=3), KEYS, inner).map(
        lambda t: {**t[0], t[1]: t[2]})
    return st.one_of(in_list, in_object)


HOLDING_WIDE = st.recursive(WIDE, _around, max_leaves=8)
"""Free-form JSON with one integer past 64 bits somewhere in it (possibly at its top)."""
SCHEMAS = st.tuples(KEYS.filter(lambda k: k != "type"), HOLDING_WIDE).map(lambda kv: {"type": "object", kv[0]: kv[1]})
TOOL = {"name": "get_location", "description": "Where the user is."}
CHAT = [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("wide"), model="scripted:echo")
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


@pytest.fixture(scope="module")
def session(server: Server) -> str:
    with server.client() as c:
        return new_session(c)


@settings(max_examples=40, deadline=None, database=None)
@given(route=st.sampled_from(["turns", "chat", "chat output"]), schema=SCHEMAS, output=HOLDING_WIDE)
def test_an_integer_past_64_bits_anywhere_in_free_form_json_is_a_422_naming_the_field(
        server: Server, session: str, route: str, schema: dict[str, Any], output: Any) -> None:
    if route == "turns":
        url, field = f"/api/sessions/{session}/turns", "body.client_tools[0].input_schema"
        body: dict[str, Any] = {"message": "hi", "client_tools": [{**TOOL, "input_schema": schema}]}
    elif route == "chat":
        url, field = "/api/chat", "body.client_tools[0].input_schema"
        body = {"id": "wide", "client_tools": [{**TOOL, "input_schema": schema}], "messages": CHAT}
    else:
        url, field = "/api/chat", "body.messages"
        body = {"id": "wide", "messages": [{"role": "assistant", "parts": [
            {"type": "tool-get_location", "toolCallId": "t1", "state": "output-available", "output": output}]}]}
    with server.client() as c:
        r = c.post(url, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert message.startswith(field) and "64 bits" in message, message
