"""Driving ``turnstream chat`` under a pseudo-terminal (pexpect), for the terminal e2e suites."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect

from tests.support.ui_stream import open_gate, release

PROMPT = "you ›"


class Chat:
    """One running chat: answer its prompt, wait for output, wait for it to end."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child

    def say(self, line: str) -> None:
        self.child.expect(PROMPT)
        self.child.sendline(line)

    def expect(self, pattern: str) -> None:
        self.child.expect(pattern)

    def expect_exit(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        status: int = self.child.exitstatus
        return status

    @property
    def seen(self) -> str:
        """Everything the chat printed up to the last match."""
        return str(self.child.before or "") + str(self.child.after or "")


# Steering: a line typed while a turn's first step waits at a FIFO gate (both terminal suites, local and
# remote, run the same two cases and differ only in how they start the chat and read its turns back).

STEERED_LINE = "use metric units"
LATE_LINE = "and the weather?"


def held_scenario(gate: Path, first: list[dict[str, Any]], then: list[dict[str, Any]]) -> dict[str, Any]:
    """One turn whose first step waits at ``gate`` once its text began, then ``then``'s steps;
    a next turn answers with its input."""
    return {"steering": True, "fragment_size": 4,
            "turns": [[{"blocks": first, "gate": {"after_events": 6, "fifo": str(gate)}}, *then],
                      [{"blocks": [{"type": "text", "text": "Next turn: {{input}}"}]}]]}


def step_scenario(gate: Path) -> dict[str, Any]:
    """A first step that calls the calculator (so a second step reads what was typed meanwhile)."""
    return held_scenario(gate, [{"type": "text", "text": "Working on it."},
                                {"type": "tool_use", "name": "calculator", "input": {"expression": "6 * 7"}}],
                         [{"blocks": [{"type": "text", "text": "Done: {{last}}"}]}])


def last_step_scenario(gate: Path) -> dict[str, Any]:
    """A first step that is the turn's last (what was typed meanwhile is read by no step)."""
    return held_scenario(gate, [{"type": "text", "text": "Working on it."}], [])


def type_while_held(chat: Chat, gate: Path, ask: str, line: str,
                    before_open: Callable[[], None] | None = None) -> None:
    """Send ``ask``; while its first step waits at ``gate``, type ``line`` and see it queued; then
    ``before_open`` and open the gate (released in any case, so that a failed check leaves nothing
    waiting)."""
    try:
        chat.say(ask)
        chat.expect("Work")  # the first step streams, then waits at the gate
        chat.child.sendline(line)
        chat.expect("↳ queued: " + re.escape(line))
        if before_open is not None:
            before_open()
        open_gate(gate)
    finally:
        release(gate)


def assert_read_by_the_next_step(requests: list[dict[str, Any]]) -> None:
    """The model's two requests of a ``step_scenario`` turn: ``STEERED_LINE`` in the second only,
    after the tool's result."""
    first, second = requests
    assert STEERED_LINE not in json.dumps(first)
    after_results = second["messages"][-1]["content"]
    assert after_results[0]["type"] == "tool_result"
    assert [b["text"] for b in after_results if b["type"] == "text"] == [STEERED_LINE]
