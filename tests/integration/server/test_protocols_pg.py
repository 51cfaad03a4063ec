"""Resume and stop across processes: two ``turnstream serve`` on one PostgreSQL database, the
chat's turn running on one, ``GET /api/chat/{id}/stream`` and ``POST /api/chat/{id}/stop``
answered by the other. The turn waits in the ``wait_for_gate`` tool until the test opens the
gate (a FIFO), so it is running whenever the test needs it to be; nothing is timed."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.server import Server, scenario, server_pair
from tests.support.ui_stream import GATE, TOOLS_ENV, chunks, open_gate, read_until, release, user

pytestmark = pytest.mark.postgres


@pytest.fixture
def pair(fresh_pg: str, tmp_path: Path) -> Iterator[tuple[Server, Server, str, Path]]:
    model = scenario(tmp_path / "gate.json", GATE)
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = {"TURNSTREAM_TEST_GATE": str(gate), **TOOLS_ENV, "PYTHONPATH": str(REPO)}
    with server_pair(tmp_path, fresh_pg, model, env) as (a, b):
        yield a, b, model, gate


def test_resume_and_stop_reach_a_turn_running_in_the_other_process(
        pair: tuple[Server, Server, str, Path]) -> None:
    a, b, model, gate = pair
    cid = "chat-" + uuid.uuid4().hex[:10]
    body = {"id": cid, "messages": [user("through the gate")], "model": model, "toolset": "none"}
    with a.client() as ca, b.client() as cb:
        ca.headers["X-AI-SDK-Version"] = "7"
        cb.headers["X-AI-SDK-Version"] = "7"
        # The turn starts on A, whose client goes away while the tool waits.
        with ca.stream("POST", "/api/chat", json=body) as r:
            first = read_until(r.iter_lines(), "tool-input-available")
        turn_id, session_id = first[0]["messageId"], first[0]["messageMetadata"]["session_id"]
        # B follows it: A's stored events first, then what A publishes, to the end.
        with cb.stream("GET", f"/api/chat/{cid}/stream") as r:
            assert r.status_code == 200 and r.headers["x-turn-id"] == turn_id
            lines = r.iter_lines()
            replayed = read_until(lines, "tool-input-available")
            open_gate(gate, "on A")
            every = replayed + chunks("\n\n".join(lines))
        texts = [c for c in every if isinstance(c, dict) and c["type"] in ("text-start", "text-delta")]
        assert [c["type"] for c in texts].count("text-start") == 2
        assert "".join(c.get("delta", "") for c in texts) == "Waiting for the gate.Done: through on A"
        outputs = [c for c in every if isinstance(c, dict) and c["type"] == "tool-output-available"]
        assert [o["output"] for o in outputs] == ["through on A"]
        assert every[-2]["type"] == "finish" and every[-2]["messageMetadata"]["status"] == "complete"
        assert cb.get(f"/api/chat/{cid}/stream").status_code == 204

        # Stopped from B while it runs on A; B's follower sees it end.
        with ca.stream("POST", "/api/chat", json={**body, "messages": [user("again")]}) as r:
            read_until(r.iter_lines(), "tool-input-available")
        with cb.stream("GET", f"/api/chat/{cid}/stream") as r:
            lines = r.iter_lines()
            read_until(lines, "tool-input-available")
            stopped = cb.post(f"/api/chat/{cid}/stop")
            assert stopped.status_code == 200 and stopped.json()["status"] in ("cancelling", "cancelled")
            rest = chunks("\n\n".join(lines))
        assert rest[-2]["type"] == "finish" and rest[-2]["messageMetadata"]["status"] == "cancelled"
        # Let A's tool thread go if it got to the gate; the stop may have come before the tool started,
        # and then nothing ever waits there (a blocking open_gate hung CI once, in the SQLite twin).
        release(gate)
        turns = ca.get(f"/api/sessions/{session_id}").json()["turns"]
        assert [t["status"] for t in turns] == ["complete", "cancelled"]
