"""``GET /readyz``, what a load balancer asks before it sends a process work (issue 24).

* A real ``turnstream serve`` on a private PostgreSQL cluster: ready; the cluster stopped: not
  ready, "database unreachable" (``/healthz`` still answers: the process lives); the cluster
  back: ready again, with no restart of the server.
* SIGTERM while a turn runs (grace long enough to look): ``/readyz`` says ``draining`` at once,
  a new turn gets ``503 shutting_down`` (a load balancer retries it on another process), the
  running turn can still be followed here; cancelling it ends the drain and the process exits 0.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.support.mock_provider import MockHandle
from tests.support.pg import Cluster
from tests.support.processes import wait_for
from tests.support.server import new_session, sse, start_server


def ready(url: str) -> tuple[int, dict[str, Any]]:
    r = httpx.get(url + "/readyz", timeout=10)
    return r.status_code, r.json()


@pytest.mark.postgres
def test_readyz_follows_the_database(tmp_path: Path, pg_cluster: Cluster) -> None:
    db = f"postgresql://postgres@127.0.0.1:{pg_cluster.port}/postgres"
    server = start_server(tmp_path, db=db, model="scripted:echo")
    try:
        assert ready(server.url) == (200, {"ready": True, "reason": None})
        pg_cluster.pg_ctl("-m", "fast", "stop")
        status = wait_for("readyz to say the database is gone", lambda: ready(server.url)[0] == 503 or None)
        assert status and ready(server.url) == (503, {"ready": False, "reason": "database unreachable"})
        pg_cluster.start()
        pg_cluster.wait_ready()
        wait_for("readyz to recover", lambda: ready(server.url)[0] == 200 or None, timeout=30)
        with server.client() as c:  # and it takes turns again
            sid = new_session(c, model="scripted:echo")
            r = c.post(f"/api/sessions/{sid}/turns", json={"message": "hi"})
            assert r.status_code == 200 and "turn_complete" in r.text
    finally:
        server.stop()


def test_sigterm_makes_readyz_say_draining_and_new_turns_503(tmp_path: Path, mock_provider: MockHandle,
                                                               scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [
        {"fragment_size": 2, "delay_ms": 50, "blocks": [{"type": "text", "text": "slow words " * 200}]}]})
    server = start_server(tmp_path, model=f"anthropic:{model}", env={
        "ANTHROPIC_BASE_URL": mock_provider.base_url, "ANTHROPIC_API_KEY": "test-key",
        "TURNSTREAM_SHUTDOWN_GRACE": "120"})
    try:
        assert ready(server.url)[0] == 200
        with server.client() as c:
            sid = new_session(c, toolset="none")
            other = new_session(c, toolset="none")
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "go"}) as s:
                start = next(iter(s))
                tid = start.data["turn_id"]
                server.proc.send_signal(signal.SIGTERM)
                wait_for("readyz to say draining", lambda: ready(server.url)[0] == 503 or None)
                assert ready(server.url)[1] == {"ready": False, "reason": "draining"}
                r = c.post(f"/api/sessions/{other}/turns", json={"message": "hello"})
                assert r.status_code == 503 and r.json()["error"] == "shutting_down" and "retry-after" in r.headers
                # the running turn is still followed here, from the store and live
                with sse(c, "GET", f"/api/sessions/{sid}/turns/{tid}/events") as f:
                    assert next(iter(f)).event == "turn_start"
                assert c.post(f"/api/sessions/{sid}/turns/{tid}/cancel").status_code in (200, 202)
                rest = s.rest()
        assert rest[-1].event in ("turn_complete", "reconnect")
        assert server.proc.wait(60) == 0
    finally:
        server.stop()
