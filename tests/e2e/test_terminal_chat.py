"""``turnstream chat`` in a real pseudo-terminal, against ``turnstream mock-provider`` (SPEC §11).

Each test registers the scenario it needs with the mock (by model name), drives the chat
with pexpect, and checks both what the user sees and what reached the provider: the
farewell gate is proven by the provider never hearing about the goodbye.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support import terminal
from tests.support.mock_provider import MockHandle

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")]

BIN = Path(sys.executable).parent / "turnstream"



@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "project"
    r.mkdir()
    (r / "setup.py").write_text("from setuptools import setup\nsetup(name='demo')\n", encoding="utf-8")
    (r / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    return r


class Chat(terminal.Chat):
    """The chat, with the SQLite store it keeps under its home."""

    def __init__(self, child: pexpect.spawn, home: Path) -> None:
        super().__init__(child)
        self.home = home

    def turns(self) -> list[tuple[str, str, str]]:
        with sqlite3.connect(self.home / "chat.db") as db:
            rows: list[tuple[str, str, str]] = db.execute(
                "SELECT session_id, input, status FROM turns ORDER BY created_at").fetchall()
        return rows


@pytest.fixture
def start_chat(mock_provider: MockHandle, root: Path, tmp_path: Path) -> Iterator[Any]:
    children: list[pexpect.spawn] = []
    home = tmp_path / "home"

    def start(model: str, *extra: str, argv: list[str] | None = None) -> Chat:
        env = dict(os.environ, ANTHROPIC_BASE_URL=mock_provider.base_url, ANTHROPIC_API_KEY="test-key",
                   TURNSTREAM_HOME=str(home), TERM="xterm", COLUMNS="200")
        args = argv or ["chat", "--model", model, "--root", str(root), *extra]
        child = pexpect.spawn(str(args[0]) if argv else str(BIN), args[1:] if argv else args, env=env,
                              encoding="utf-8", timeout=20, dimensions=(40, 200))
        children.append(child)
        return Chat(child, home)

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)


TOOLS_SCENARIO: dict[str, Any] = {
    "fragment_size": 3,
    "turns": [
        [
            {"blocks": [{"type": "text", "text": "Let me look around."},
                        {"type": "tool_use", "name": "list_directory", "input": {"path": "."}},
                        {"type": "tool_use", "name": "calculator", "input": {"expression": "6 * 7"}}]},
            {"blocks": [{"type": "text", "text": "The answer is {{results[1]}}."}]},
        ],
        [
            {"blocks": [{"type": "tool_use", "name": "read_file", "input": {"path": "../secret.txt"}}]},
            {"blocks": [{"type": "text", "text": "I could not read it."}]},
        ],
    ],
}


def test_tools_stream_inline_and_a_farewell_ends_without_a_model_call(
        mock_provider: MockHandle, start_chat: Any) -> None:
    model = "anthropic:" + mock_provider.scenario("chat-tools", TOOLS_SCENARIO)
    chat = start_chat(model)
    chat.say("what is here?")
    chat.expect("Let me look around.")
    chat.expect("list_directory")
    chat.expect("calculator")
    chat.expect("notes.txt")  # the listing, beneath the call
    chat.expect("setup.py")
    chat.expect("42")
    chat.expect(r"The answer is 42\.")
    chat.say("thanks, read ../secret.txt")  # begins with thanks: goes to the model
    chat.expect("outside the allowed directory")
    chat.expect("I could not read it.")
    assert len(mock_provider.requests(model)) == 4
    chat.say("thank you, that's all")
    chat.expect("Bye!")
    assert chat.expect_exit() == 0
    assert len(mock_provider.requests(model)) == 4  # the goodbye never reached the provider
    # the refused read went back to the model as an error result, not a crash
    last = mock_provider.requests(model)[-1]["messages"][-1]["content"]
    assert any(b.get("is_error") and "outside the allowed directory" in str(b.get("content")) for b in last)
    assert "TOP SECRET" not in json.dumps(mock_provider.requests(model))


MARKDOWN_ANSWER = (
    "# Shopping list\n\nYou need **milk** and `eggs`, then:\n\n- fresh bread\n- salted butter\n\n"
    "```\nqty = 2\n\nprint(qty)\n```\n\nThat is *all*."
)


def test_the_answer_is_rendered_as_markdown_while_it_streams(mock_provider: MockHandle, start_chat: Any) -> None:
    model = "anthropic:" + mock_provider.scenario("chat-markdown", {
        "fragment_size": 4, "delay_ms": 5,
        "steps": [{"blocks": [{"type": "text", "text": MARKDOWN_ANSWER}]}],
    })
    chat = start_chat(model)
    chat.child.logfile_read = screen = io.StringIO()  # everything the chat writes
    chat.say("what do I need?")
    chat.expect("Shopping list")
    chat.expect("milk")
    chat.expect(r"•\S* *(\x1b\[[0-9;]*m)*fresh bread")  # a bullet list, drawn with bullets
    chat.expect(r"•\S* *(\x1b\[[0-9;]*m)*salted butter")
    chat.expect("print")
    chat.expect("That is")
    chat.expect(terminal.PROMPT)
    seen = screen.getvalue().partition("what do I need?")[2]
    chat.child.sendline("bye")
    assert chat.expect_exit() == 0
    # The markup is rendered, not shown: no heading hashes, bold as bold, no list dashes.
    # (A fragment mid-stream may show an unclosed "**mi" for a moment; a finished one never.)
    assert "# Shopping list" not in seen
    assert "**milk**" not in seen
    assert "\x1b[1mmilk" in seen
    assert "- fresh bread" not in seen
    assert "*all*" not in seen
    assert "```" not in seen  # the fence is drawn as a code block


@pytest.mark.parametrize("goodbye", ["bye!", "thanks!", "ok thanks bye"])
def test_a_first_message_that_is_only_a_farewell_calls_nothing(
    mock_provider: MockHandle, start_chat: Any, goodbye: str
) -> None:
    model = "anthropic:" + mock_provider.scenario(
        "chat-never", {"steps": [{"blocks": [{"type": "text", "text": "unexpected"}]}]})
    chat = start_chat(model)
    chat.say(goodbye)
    chat.expect("Bye!")
    assert chat.expect_exit() == 0
    assert mock_provider.requests(model) == []


def test_no_is_an_answer_for_the_model(mock_provider: MockHandle, start_chat: Any) -> None:
    echo = {"steps": [{"blocks": [{"type": "text", "text": "You said: {{input}}"}]}]}
    model = "anthropic:" + mock_provider.scenario("chat-no", echo)
    chat = start_chat(model)
    chat.say("no")
    chat.expect("You said: no")
    chat.say("no, use the other file")
    chat.expect("You said: no, use the other file")
    chat.child.sendeof()
    assert chat.expect_exit() == 0
    assert len(mock_provider.requests(model)) == 2


def test_ctrl_c_cancels_the_turn_not_the_chat(mock_provider: MockHandle, start_chat: Any) -> None:
    long_text = "word " * 200
    model = "anthropic:" + mock_provider.scenario("chat-slow", {
        "fragment_size": 5, "delay_ms": 30,
        "turns": [[{"blocks": [{"type": "text", "text": "Starting. " + long_text}]}],
                  [{"blocks": [{"type": "text", "text": "Still here: {{input}}"}]}]],
    })
    chat = start_chat(model)
    chat.say("talk a lot")
    chat.expect("Starting.")
    chat.child.sendintr()
    chat.expect("cancelled")
    chat.say("are you there?")
    chat.expect("Still here: are you there?")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert [(inp, status) for _, inp, status in chat.turns()] == [
        ("talk a lot", "cancelled"), ("are you there?", "complete")]


def test_session_resumes_the_stored_history(mock_provider: MockHandle, start_chat: Any) -> None:
    model = "anthropic:" + mock_provider.scenario("chat-memory", {
        "turns": [[{"blocks": [{"type": "text", "text": "Noted: {{input}}"}]}],
                  [{"blocks": [{"type": "text", "text": "Still noted."}]}]],
    })
    first = start_chat(model, "--session", "ses_e2e_resume")
    first.say("my name is Ada")
    first.expect("Noted: my name is Ada")
    first.say("bye")
    first.expect("--session ses_e2e_resume")
    assert first.expect_exit() == 0

    second = start_chat(model, "--session", "ses_e2e_resume")
    second.expect("my name is Ada")  # the earlier exchange is shown
    second.say("what is my name?")
    second.expect("Still noted.")
    second.say("bye")
    assert second.expect_exit() == 0
    messages = mock_provider.requests(model)[-1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert "my name is Ada" in json.dumps(messages[0])
    assert "Noted: my name is Ada" in json.dumps(messages[1])


APPROVAL_SCRIPT = """
import asyncio, sys
from pathlib import Path
from turnstream import tool
from turnstream.chat.local import run_chat

@tool(requires_approval=True)
def delete_everything(target: str) -> str:
    \"\"\"Pretend to delete something.\"\"\"
    return f"deleted {target}"

sys.exit(asyncio.run(run_chat(sys.argv[1], Path(sys.argv[2]), extra_tools=[delete_everything])))
"""


def test_approval_is_asked_inline(tmp_path: Path, root: Path, start_chat: Any) -> None:
    scenario = tmp_path / "approval.json"
    scenario.write_text(json.dumps({
        "name": "approval", "fragment_size": 4,
        "turns": [
            [{"blocks": [{"type": "tool_use", "name": "delete_everything", "input": {"target": "build/"}}]},
             {"blocks": [{"type": "text", "text": "Result: {{last}}"}]}],
        ] * 2,
    }), encoding="utf-8")
    script = tmp_path / "approval_chat.py"
    script.write_text(APPROVAL_SCRIPT, encoding="utf-8")
    chat = start_chat("", argv=[sys.executable, str(script), f"scripted:{scenario}", str(root)])
    chat.say("clean up")
    chat.expect(r"Allow delete_everything")
    chat.expect(r"\[y/N\]")
    chat.child.sendline("n")
    chat.expect("denied")
    chat.expect("Result: The user denied this tool call")
    chat.say("clean up again")
    chat.expect(r"\[y/N\]")
    chat.child.sendline("y")
    chat.expect("allowed")
    chat.expect("Result: deleted build/")
    chat.say("bye")
    assert chat.expect_exit() == 0
