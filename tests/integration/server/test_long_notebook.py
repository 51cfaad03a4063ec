"""A long notebook session against the mock's small-window model (``mock-8k``), through a real
server, on each wire format (issue 30): forty turns, each running a cell that prints 50,000
characters. Every turn completes; every request the mock received fits its window and passes
its validators (it refuses any other, with the API's own error); old tool results are cleared
and the first turns summarised, each announced by ``context_managed``; the replay and the audit
trail still show every original result."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.paths import REPO
from tests.support.server import Server, new_session, run_turn, server_errors, start_server
from turnstream.mock import context_rules
from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors

TURNS = 40
WINDOW = 8 * 1024
CODE = "print('0123456789' * 5000)"  # 50,000 characters of output
VALIDATORS = {"anthropic": anthropic_errors, "openai": openai_chat_errors, "openai-responses": openai_responses_errors}
SUMMARY = "The user ran a cell each turn; every cell printed the digits 0-9 five thousand times."
SCRIPT = {"fragment_size": 64,
          "replies": [{"when": {"input": "^Summarise the conversation"},
                       "steps": [{"blocks": [{"type": "text", "text": SUMMARY}]}]}],
          "steps": [
              {"blocks": [{"type": "tool_use", "name": "create_cell", "input": {"code": CODE}}]},
              {"blocks": [{"type": "tool_use", "name": "run_cell", "input": {"cell_id": "{{last.cell_id}}"}}]},
              {"blocks": [{"type": "text", "text": "The cell printed 50,000 digits."}]}]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mock_provider: MockHandle) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("long"), env=mock_provider.env())
    try:
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


def fits(body: dict[str, Any], api: str) -> bool:
    tokens = context_rules.request_tokens(body)
    return tokens + int(body.get("max_tokens") or 0) <= WINDOW if api == "anthropic" else tokens <= WINDOW


@pytest.mark.timeout(600)
@pytest.mark.parametrize("api", ["anthropic", "openai", "openai-responses"])
def test_forty_turns_of_big_cells_fit_a_small_window(api: str, served: Server, mock_provider: MockHandle,
                                                     scenario_name: str) -> None:
    name = mock_provider.scenario(f"{scenario_name}-notebook-mock-8k", SCRIPT)
    managed: list[dict[str, Any]] = []
    with served.client(timeout=120) as c:
        sid = new_session(c, model=f"{api}:{name}")
        for i in range(TURNS):
            events = run_turn(c, sid, f"run cell {i}")
            assert events[-1].event == "turn_complete" and events[-1].data["status"] == "complete", \
                (i, events[-1].data, [e.data for e in events if e.event == "error"])
            managed += [e.data for e in events if e.event == "context_managed"]
        audit = c.get(f"/api/sessions/{sid}/audit").json()
        stored = c.get(f"/api/sessions/{sid}").json()
    bodies = mock_provider.requests(name)
    summaries = [b for b in bodies if "Summarise the conversation" in json.dumps(b)]
    assert len(bodies) == 3 * TURNS + len(summaries), "no request was refused and asked again"
    assert all(fits(b, api) for b in bodies)
    assert all(VALIDATORS[api](b) is None for b in bodies)
    assert any(m["cleared"] for m in managed), "old tool results were cleared"
    assert summaries and any(m["summarised"] for m in managed), "the first turns were summarised"
    assert not any(m["retry"] for m in managed)
    # the last request: a summary stands for the first turns, the newest are sent as they were
    last = json.dumps(bodies[-1])
    assert "A summary of the first" in last and f"run cell {TURNS - 1}" in last and "run cell 0\"" not in last

    # nothing stored was shortened: the session, the audit trail and the replay show every result
    outputs = [b["content"] for t in stored["turns"] for b in t["blocks"]
               if b["type"] == "tool_result" and "0123456789" in b["content"]]
    assert len(outputs) == TURNS and not any("[cleared to fit" in o for o in outputs)
    runs = [r for r in audit["tool_runs"] if r["tool"] == "run_cell"]
    assert len(runs) == TURNS and all("0123456789" in r["result"] and "[cleared" not in r["result"] for r in runs)
    out = subprocess.run([sys.executable, "-m", "turnstream.cli", "replay", sid, "--db", served.db],
                         capture_output=True, text=True, timeout=120, cwd=REPO, env={"PATH": "/usr/bin:/bin",
                                                                                     "COLUMNS": "400"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("0123456789") >= TURNS and "[cleared to fit" not in out.stdout
    assert "summary of the first" in out.stdout
