"""Helpers for the protocol tests: a turn held in a tool, or a provider stream held half way,
until the test opens a gate, and reading the AI SDK UI message stream at the wire."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.paths import REPO
from tests.support.server import Server, server_errors, start_server

GATE = {"name": "gate", "fragment_size": 8, "steps": [
    {"blocks": [{"type": "text", "text": "Waiting for the gate."},
                {"type": "tool_use", "name": "wait_for_gate", "input": {}}]},
    {"blocks": [{"type": "text", "text": "Done: {{last}}"}]}]}
"""A turn that waits in ``wait_for_gate`` (``tests/support/protocol_tools.py``) until ``open_gate``."""

TOOLS_ENV = {"TURNSTREAM_TOOLS": "tests.support.protocol_tools:TOOLS"}


LIVE_TEXT = "Each piece of this text reaches the client while the model is still writing."


def live_scenario(gate: Path) -> dict[str, Any]:
    """``LIVE_TEXT``, whose provider stream waits after its first fragment until ``open_gate``
    (the scenario's ``gate``)."""
    return {"name": "live", "fragment_size": 6, "steps": [
        {"blocks": [{"type": "text", "text": LIVE_TEXT}], "gate": {"after_events": 2, "fifo": str(gate)}}]}


@contextlib.contextmanager
def gated_server(tmp: Path, model: str, env: dict[str, str] | None = None) -> Iterator[tuple[Server, Path]]:
    """A ``turnstream serve`` in ``tmp`` with the protocol tools (``TOOLS_ENV``) and the FIFO gate their
    ``wait_for_gate`` waits at; stopped at the end, with no error in its log."""
    gate = tmp / "gate"
    os.mkfifo(gate)
    srv = start_server(tmp, model=model, env={
        **TOOLS_ENV, "PYTHONPATH": str(REPO), "TURNSTREAM_TEST_GATE": str(gate), **(env or {})})
    try:
        yield srv, gate
    finally:
        srv.stop()
        assert server_errors(srv) == []


def open_gate(gate: Path, word: str = "open") -> None:
    """Let what waits at the gate through (blocks until something waits)."""
    gate.write_text(word)


def release(gate: Path) -> None:
    """Open a gate that a failed check left a stream waiting at, so that the server can stop."""
    with contextlib.suppress(OSError):  # ENXIO: nothing waits at it
        os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))


def user(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex[:8], "role": "user", "parts": [{"type": "text", "text": text}]}


def chunks(body: str) -> list[Any]:
    """The chunks of a UI message stream's body (``[DONE]`` as the string)."""
    out: list[Any] = []
    for frame in body.split("\n\n"):
        if frame.startswith("data: "):
            payload = frame[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def read_until(lines: Iterator[str], kind: str) -> list[dict[str, Any]]:
    """Chunks of an open UI stream (its ``iter_lines()``) up to the first of type ``kind``."""
    seen: list[dict[str, Any]] = []
    for line in lines:
        if line.startswith("data: {"):
            seen.append(json.loads(line[len("data: "):]))
            if seen[-1]["type"] == kind:
                return seen
    raise AssertionError(f"the stream ended before {kind}: {seen}")
