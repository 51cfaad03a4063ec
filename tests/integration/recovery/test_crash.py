"""kill -9 a process in the middle of a turn, then recover (SPEC §6, issue 4).

The child (``child_turn.py``) runs ``Agent(...).stream()`` against the mock provider, which
this process serves over HTTP; it prints every ``block_stop`` it receives, and a listener
only receives an event after its write committed. The parent kills it at a known moment,
read from those lines (no sleeps), then opens the same database, recovers and checks:

* every block the child reported is stored, unchanged, and nothing else is;
* the child's runner is dead at once (its liveness lock went with it) and the turn is
  ``interrupted`` through the close-out (a call left without a result gets one);
* no tool ran again;
* the next message in the session works: the mock provider, which refuses what the real
  API refuses, accepts the request, and a call left without a result got an ``is_error``
  "interrupted" result in it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.mock_provider import MockHandle
from turnstream import Agent, Tool, ToolResultBlock, ToolUseBlock, tool
from turnstream.lifecycle import interrupt_orphans
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.store import open_store
from turnstream.transcript import INTERRUPTED_RESULT

CHILD = Path(__file__).with_name("child_turn.py")
LONG = "This answer streams slowly, two characters at a time, so the kill lands mid-stream. " * 6


class Child:
    """The child process and the lines it printed."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: Path) -> None:
        self.proc = proc
        self.stderr = stderr
        self.lines: list[dict[str, Any]] = []

    async def wait_for(self, event: str, timeout: float = 30.0, **match: Any) -> dict[str, Any]:
        """Read lines until one reports ``event`` (with the given fields); bounded."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"the child did not report {event} {match} in {timeout}s: {self.lines}")
            raw = await asyncio.wait_for(self.proc.stdout.readline(), left)
            if not raw:
                await self.proc.wait()
                pytest.fail(f"the child exited ({self.proc.returncode}) before {event}: "
                            f"{self.stderr.read_text()[-3000:]}")
            line = orjson.loads(raw)
            self.lines.append(line)
            if line["event"] == event and all(line.get(k) == v for k, v in match.items()):
                return line

    def stored(self) -> list[dict[str, Any]]:
        return [line["block"] for line in self.lines if line["event"] == "block_stop"]

    async def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(self.proc.wait(), 10) == -signal.SIGKILL


async def start_child(tmp_path: Path, mock: MockHandle, db_url: str, session_id: str, model: str) -> Child:
    fifo = tmp_path / "signal"
    os.mkfifo(fifo)
    stderr = tmp_path / "child.stderr"
    env = {**os.environ, "ANTHROPIC_BASE_URL": mock.base_url, "ANTHROPIC_API_KEY": "test-key"}
    env.pop("TURNSTREAM_DB", None)
    with stderr.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(CHILD), db_url, session_id, f"anthropic:{model}", str(tmp_path / "runs"),
            str(fifo), stdout=asyncio.subprocess.PIPE, stderr=err, env=env)
    return Child(proc, stderr)


def parent_tools(runs: Path) -> list[Tool]:
    """The child's tools, as the next turn declares them; any run is recorded in ``runs``."""

    @tool
    def echo(value: str) -> str:
        """Echo a value."""
        with runs.open("a") as f:
            f.write("echo (after the crash)\n")
        return f"echo:{value}"

    @tool
    def wait_for_signal(name: str) -> str:
        """Wait for a signal that never comes."""
        with runs.open("a") as f:
            f.write("wait_for_signal (after the crash)\n")
        return "signal"

    return [echo, wait_for_signal]


def unmarked(content: Any) -> Any:
    """Message content without its prompt-cache breakpoints (``cache_control``)."""
    if isinstance(content, str):
        return content
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


SCENARIOS: dict[str, dict[str, Any]] = {
    # Step 1 is quick (a text and a call of a tool that returns at once); step 2's text trickles.
    "streaming": {"turns": [
        [{"blocks": [text("Let me echo first."), {"type": "tool_use", "name": "echo", "input": {"value": "one"}}]},
         {"fragment_size": 2, "delay_ms": 15, "blocks": [text(LONG)]}],
        [{"blocks": [text("Recovered after the crash.")]}]]},
    # Step 1 calls a tool that never returns.
    "tool": {"turns": [
        [{"blocks": [text("Waiting for the signal."),
                     {"type": "tool_use", "name": "wait_for_signal", "input": {"name": "go"}}]}],
        [{"blocks": [text("Recovered after the crash.")]}]]},
}


@pytest.mark.parametrize("moment", ["streaming", "tool"])
async def test_kill_9_mid_turn_then_recover(
    moment: str, db_url: str, tmp_path: Path, mock_provider: MockHandle, scenario_name: str,
) -> None:
    model = mock_provider.scenario(scenario_name, SCENARIOS[moment])
    session_id = f"crash-{moment}"
    child = await start_child(tmp_path, mock_provider, db_url, session_id, model)
    try:
        if moment == "streaming":
            # Step 1's three blocks are stored; the first piece of step 2's text (block 3) arrived.
            await child.wait_for("delta", index=3)
            assert len(child.stored()) == 3
        else:
            await child.wait_for("tool_started", tool="wait_for_signal")
            assert len(child.stored()) == 2
    finally:
        await child.kill()
    runs = tmp_path / "runs"
    ran_before = runs.read_text().splitlines()
    assert ran_before == (["echo"] if moment == "streaming" else ["wait_for_signal"])

    store = open_store(db_url)
    await store.open()
    try:
        [crashed] = await store.list_turns(session_id)
        assert crashed.status == "running"  # nobody had the chance to say otherwise
        # The child's runner is gone (its liveness lock went with the process): no timeout.
        assert await interrupt_orphans(store) == [crashed.id]

        crashed_after = await store.get_turn(crashed.id)
        assert crashed_after is not None and crashed_after.status == "interrupted"
        # Exactly what the child was told was stored, intact, in order; then what the close-out
        # added: a result for a call that had none, so the transcript is valid as stored.
        stored = [b.model_dump(mode="json") for b in crashed_after.blocks]
        assert stored[:len(child.stored())] == child.stored()
        added = crashed_after.blocks[len(child.stored()):]
        assert [(b.type, getattr(b, "content", None)) for b in added] == (
            [("tool_result", INTERRUPTED_RESULT)] if moment == "tool" else [])

        provider = AnthropicProvider(model, api_key="test-key", base_url=mock_provider.base_url)
        agent = Agent(provider, tools=parent_tools(runs), store=store, session_id=session_id)
        try:
            nxt = await agent.run("Are you still there?")
        finally:
            await provider.aclose()
        assert nxt.status == "complete" and nxt.text == "Recovered after the crash."

        # No tool ran again: not at recovery, not in the next turn.
        assert runs.read_text().splitlines() == ran_before
        # The crashed turn is left as it was.
        again = await store.get_turn(crashed.id)
        assert again is not None and again.status == "interrupted" and again.blocks == crashed_after.blocks

        request = mock_provider.requests(model)[-1]  # accepted: the mock answered it
        messages = request["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert unmarked(messages[0]["content"]) in ("start the work", [text("start the work")])
        call = next(b for b in crashed_after.blocks if isinstance(b, ToolUseBlock))
        assert messages[1]["content"][-1]["type"] == "tool_use"
        assert messages[1]["content"][-1]["id"] == call.tool_use_id
        result, question = messages[2]["content"]
        assert unmarked([question]) == [text("Are you still there?")]
        if moment == "tool":
            # The dangling call was closed out when the turn was interrupted.
            assert result == {"type": "tool_result", "tool_use_id": call.tool_use_id,
                              "content": INTERRUPTED_RESULT, "is_error": True}
        else:
            # The call had finished before the crash: its stored result is sent as it was; the
            # half-streamed text of step 2 was never stored and is not sent.
            [stored_result] = [b for b in crashed_after.blocks if isinstance(b, ToolResultBlock)]
            assert not stored_result.is_error and stored_result.content == "echo:one"
            assert result["tool_use_id"] == call.tool_use_id and result["content"] == "echo:one"
            assert not result.get("is_error")
            assert LONG[:20] not in orjson.dumps(request).decode()
    finally:
        await store.aclose()
