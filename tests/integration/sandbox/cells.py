"""Run cell code the way an attacker gets it run: a user's message makes the model call
``create_cell`` with that code and ``run_cell`` on it, through a real ``turnstream serve``.

The model is the scripted scenario ``cell.json`` (``{{input}}`` is the user's message), so
every message of a session becomes a new cell of that session's notebook, run in its kernel.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx2 as httpx
from websockets.sync.client import connect

from tests.support.server import Event, Server, new_session, run_turn, scenario

CANARY_KEY = "sk-ant-canary-5f0c2b9d"
"""A provider key in the server's environment that no cell may read."""
BOB_SECRET = "bob-secret-7c1e44"
"""What bob keeps in his kernel and his working directory, and says in his conversation."""
KERNEL_MEMORY_MB = 1024
SANDBOXED = {"TURNSTREAM_NOTEBOOK_SANDBOX": "on", "TURNSTREAM_NOTEBOOK_NETWORK": "off"}
"""Whatever the environment running the tests says."""
SANDBOX_ON = "Notebook cells run in a bubblewrap sandbox (no network; limits by "
"""What the server prints at start when kernels are sandboxed."""


CELL_SCENARIO: dict[str, Any] = {"name": "cell", "fragment_size": 4096, "steps": [
    {"blocks": [{"type": "tool_use", "name": "create_cell", "input": {"code": "{{input}}"}}]},
    {"blocks": [{"type": "tool_use", "name": "run_cell", "input": {"cell_id": "{{last.cell_id}}"}}]},
    {"blocks": [{"type": "text", "text": "ran"}]}]}


def cell_model(directory: Path) -> str:
    """Write the scenario into ``directory``; the ``scripted:`` model that plays it."""
    directory.mkdir(parents=True, exist_ok=True)
    return scenario(directory / "cell.json", CELL_SCENARIO)


def tool_results(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data["block"] for e in events
            if e.event == "block_stop" and e.data["block"]["type"] == "tool_result"]


class Notebook:
    """One session of one user; ``run(code)`` runs ``code`` as the session's next cell."""

    def __init__(self, server: Server, key: str | None = None) -> None:
        self.server = server
        self.key = key
        with self.client() as c:
            self.id = new_session(c, toolset="notebook")

    def client(self) -> httpx.Client:
        return self.server.client(self.key)

    def run(self, code: str) -> dict[str, Any]:
        """The run_cell result, as the model reads it."""
        with self.client() as c:
            events = run_turn(c, self.id, code)
        assert events[-1].data["status"] == "complete", events[-1].data
        results = tool_results(events)
        assert len(results) == 2, results
        assert not results[1].get("is_error"), results[1]
        out: dict[str, Any] = json.loads(results[1]["content"])
        return out

    def value(self, code: str) -> str:
        """Run ``code``; the text of its last value (the cell must succeed)."""
        result = self.run(code)
        assert result["status"] == "success", result
        return str(result["outputs"][-1]["text"])

    def state(self) -> dict[str, Any]:
        """The notebook as a page sees it when it connects (the WebSocket's hello)."""
        url = self.server.url.replace("http://", "ws://") + f"/ws/sessions/{self.id}"
        key = self.key or self.server.key
        with connect(url, subprotocols=["turnstream", f"turnstream.key.{key}"],  # type: ignore[list-item]
                     open_timeout=10) as ws:
            hello = json.loads(ws.recv(timeout=10))
        assert hello["type"] == "hello", hello
        notebook: dict[str, Any] = hello["notebook"]
        return notebook

    def delete(self) -> None:
        with self.client() as c:
            r = c.delete(f"/api/sessions/{self.id}")
            assert r.status_code == 200, r.text


def text_of(result: dict[str, Any]) -> str:
    """Everything a cell's result says, as one string (to search for leaks)."""
    return json.dumps(result)


def host_ip() -> str:
    """This machine's address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))
        return str(s.getsockname()[0])


class Bob:
    """Bob's notebook: a kernel holding a secret, checked after every attack."""

    def __init__(self, server: Server, key: str) -> None:
        self.notebook = Notebook(server, key)
        value = self.notebook.value(f"secret = {BOB_SECRET!r}\nopen('bob.txt', 'w').write(secret)\nsecret")
        assert value == repr(BOB_SECRET)

    def assert_intact(self) -> None:
        """Bob's kernel is the same one (nothing re-ran) and still holds his variable and file."""
        result = self.notebook.run("(secret, open('bob.txt').read())")
        assert result["status"] == "success", result
        assert result["ran_upstream"] == []
        assert result["outputs"][-1]["text"] == repr((BOB_SECRET, BOB_SECRET))
