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

    def start(model: str, *extra: str, argv: list[str] | None = None, env_extra: dict[str, str] | None = None) -> Chat:
        env = dict(os.environ, ANTHROPIC_BASE_URL=mock_provider.base_url, ANTHROPIC_API_KEY="test-key",
                   TURNSTREAM_HOME=str(home), TERM="xterm", COLUMNS="200", **(env_extra or {}))
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


def start_approval_chat(tmp_path: Path, root: Path, start_chat: Any) -> Any:
    """The chat of ``APPROVAL_SCRIPT`` on a model that asks for ``delete_everything`` then says its result,
    twice."""
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
    return start_chat("", argv=[sys.executable, str(script), f"scripted:{scenario}", str(root)])


def test_approval_is_asked_inline(tmp_path: Path, root: Path, start_chat: Any) -> None:
    chat = start_approval_chat(tmp_path, root, start_chat)
    chat.say("clean up")
    chat.expect(r"Allow delete_everything")
    chat.expect(r"\[y/N/a: always in this session\]")
    chat.child.sendline("n")
    chat.expect("denied")
    chat.expect("Result: The user denied this tool call")
    chat.say("clean up again")
    chat.expect(r"\[y/N/a")
    chat.child.sendline("y")
    chat.expect("allowed")
    chat.expect("Result: deleted build/")
    chat.say("bye")
    assert chat.expect_exit() == 0


def test_a_denial_can_say_why_and_the_model_reads_it(tmp_path: Path, root: Path, start_chat: Any) -> None:
    chat = start_approval_chat(tmp_path, root, start_chat)
    chat.say("clean up")
    chat.expect(r"\[y/N/a: always in this session\]")
    chat.expect(r"\(or say why not\)")
    chat.child.sendline("n: the release script still reads build/")
    chat.expect("denied: the release script still reads build/")
    chat.expect("Result: The user denied this tool call; it was not run. Do not retry it unless the user asks. "
                "The user's reason: the release script still reads build/")
    chat.say("clean up again")
    chat.expect(r"\[y/N/a")
    chat.child.sendline("keep it, I said")  # any words other than an answer are a no, and its reason
    chat.expect("denied: keep it, I said")
    chat.expect("The user's reason: keep it, I said")
    chat.say("one more time")
    chat.expect(r"\[y/N/a")
    chat.child.sendintr()  # Ctrl-C at the question: the waiting turn is closed out, not left open
    chat.expect("cancelled")
    chat.say("bye")
    assert chat.expect_exit() == 0
    with sqlite3.connect(tmp_path / "home" / "chat.db") as db:
        reasons = db.execute("SELECT approved, reason FROM tool_decisions ORDER BY decided_at").fetchall()
    assert reasons == [(0, "the release script still reads build/"), (0, "keep it, I said")]
    assert [status for _, _, status in chat.turns()] == ["complete", "complete", "cancelled"]


def test_a_dropped_file_is_attached_quoted_escaped_or_alone_on_its_line(
        mock_provider: MockHandle, start_chat: Any, root: Path) -> None:
    """What terminals type when a file is dropped on them: the path quoted with ' (GNOME), with
    backslashes before spaces (macOS Terminal, iTerm2), or in double quotes (Windows Terminal)."""
    from tests.support.media import PDF, PNG

    (root / "two dots.png").write_bytes(PNG)
    (root / "my page.pdf").write_bytes(PDF)
    (root / "third dot.png").write_bytes(PNG)
    model = "anthropic:" + mock_provider.scenario("chat-drop", {
        "steps": [{"blocks": [{"type": "text", "text": "Two pictures and a page."}]}]})
    chat = start_chat(model)
    chat.say(f"/attach '{root / 'two dots.png'}'")
    chat.expect(r"two dots\.png \(image/png, \d+ bytes\) goes with your next message")
    chat.say("/attach " + str(root / "my page.pdf").replace(" ", "\\ "))
    chat.expect(r"my page\.pdf \(application/pdf, \d+ bytes\) goes with your next message")
    chat.say(f'"{root / "third dot.png"}" ')  # a line that is only a dropped file: attached, not sent
    chat.expect(r"third dot\.png \(image/png, \d+ bytes\) goes with your next message")
    assert mock_provider.requests(model) == []
    chat.say("what are these?")
    chat.expect("Two pictures and a page.")
    content = mock_provider.requests(model)[-1]["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["text", "image", "document", "image"]
    assert content[0]["text"] == "what are these?"
    chat.say("bye")
    assert chat.expect_exit() == 0


def test_a_server_that_sends_no_usage_shows_usage_unknown(start_chat: Any) -> None:
    """llama.cpp's server sends no usage chunk: the line under the answer says so, not 0 tokens."""
    from tests.support.body_server import serving

    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "tiny",
             "choices": [{"index": 0, "delta": {"content": "Hi there."}, "finish_reason": "stop"}]}
    with serving(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()) as srv:
        chat = start_chat("openai:tiny", env_extra={"OPENAI_BASE_URL": srv.base_url + "/v1",
                                                    "OPENAI_API_KEY": "test-key"})
        chat.say("hello")
        chat.expect("Hi there.")
        chat.expect("↳ usage unknown · 1 step")
        assert " 0 in" not in chat.seen
        chat.say("bye")
        assert chat.expect_exit() == 0


def test_attach_sends_an_image_and_a_pdf_with_the_next_message(
        mock_provider: MockHandle, start_chat: Any, root: Path) -> None:
    from tests.support.media import PDF, PNG

    (root / "dot.png").write_bytes(PNG)
    (root / "page.pdf").write_bytes(PDF)
    (root / "table.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    model = "anthropic:" + mock_provider.scenario("chat-attach", {
        "steps": [{"blocks": [{"type": "text", "text": "A dot and a page."}]}]})
    chat = start_chat(model)
    chat.say(f"/attach {root / 'dot.png'}")
    chat.expect(r"dot\.png \(image/png, \d+ bytes\) goes with your next message")
    chat.say(f"/attach {root / 'table.csv'}")
    chat.expect("error:.*table.csv")
    chat.say(f"/attach {root / 'missing.png'}")
    chat.expect("error:.*missing.png")
    chat.say(f"/attach {root / 'page.pdf'}")
    chat.expect(r"page\.pdf \(application/pdf")
    assert mock_provider.requests(model) == []  # nothing is sent before the message
    chat.say("what are these?")
    chat.expect("A dot and a page.")
    content = mock_provider.requests(model)[-1]["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["text", "image", "document"]
    assert content[1]["source"]["media_type"] == "image/png"
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert len(mock_provider.requests(model)) == 1  # the attachments went once, with that message


def test_always_allow_stops_asking_in_the_session(tmp_path: Path, root: Path, start_chat: Any) -> None:
    scenario = tmp_path / "always.json"
    scenario.write_text(json.dumps({
        "name": "always", "fragment_size": 4,
        "turns": [
            [{"blocks": [{"type": "tool_use", "name": "delete_everything", "input": {"target": f"dir{i}/"}}]},
             {"blocks": [{"type": "text", "text": "Result {{input}}: {{last}}"}]}] for i in (1, 2)],
    }), encoding="utf-8")
    script = tmp_path / "approval_chat.py"
    script.write_text(APPROVAL_SCRIPT, encoding="utf-8")
    chat = start_chat("", argv=[sys.executable, str(script), f"scripted:{scenario}", str(root)])
    chat.say("first")
    chat.expect(r"\[y/N/a: always in this session\]")
    chat.child.sendline("a")
    chat.expect("always allowed in this session: delete_everything")
    chat.expect("Result first: deleted dir1/")
    chat.say("second")
    chat.expect("Result second: deleted dir2/")
    assert "Allow delete_everything" not in str(chat.child.before)  # the second turn asked nothing
    chat.say("bye")
    assert chat.expect_exit() == 0
    with sqlite3.connect(tmp_path / "home" / "chat.db") as db:
        grants = db.execute("SELECT tool, granted_by FROM tool_grants").fetchall()
        decisions = db.execute("SELECT tool, approved, source, always FROM tool_decisions"
                               " ORDER BY decided_at").fetchall()
    # the local user answered the turn's question (it paused for it); the second turn used the grant
    assert grants == [("delete_everything", "local")]
    assert decisions == [("delete_everything", 1, "user", 1), ("delete_everything", 1, "session_grant", 0)]


IMAGE_TOOL_SCRIPT = """
import asyncio, sys
from pathlib import Path
from turnstream import ImagePart, tool
from turnstream.chat.local import run_chat
from tests.support.media import GIF

@tool
def snapshot() -> list[object]:
    \"\"\"A picture of the screen.\"\"\"
    return ["the screen, as a GIF", ImagePart(GIF, "image/gif", "screen.gif")]

sys.exit(asyncio.run(run_chat(sys.argv[1], Path(sys.argv[2]), extra_tools=[snapshot])))
"""


def test_an_image_a_tool_returns_is_a_line(tmp_path: Path, root: Path, start_chat: Any) -> None:
    from tests.support.media import GIF
    from tests.support.paths import REPO

    scenario = tmp_path / "snapshot.json"
    scenario.write_text(json.dumps({"name": "snapshot", "steps": [
        {"blocks": [{"type": "tool_use", "name": "snapshot", "input": {}}]},
        {"blocks": [{"type": "text", "text": "I see a dot."}]}]}), encoding="utf-8")
    script = tmp_path / "snapshot_chat.py"
    script.write_text(f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + IMAGE_TOOL_SCRIPT, encoding="utf-8")
    chat = start_chat("", argv=[sys.executable, str(script), f"scripted:{scenario}", str(root)])
    chat.say("look at the screen")
    chat.expect("the screen, as a GIF")
    chat.expect(rf"screen\.gif \(image/gif, {len(GIF)} bytes\) from snapshot")
    chat.expect("I see a dot.")
    chat.say("bye")


def test_a_budget_pauses_and_asks_and_each_turn_shows_its_usage(
        mock_provider: MockHandle, start_chat: Any, tmp_path: Path) -> None:
    step = {"usage": {"input_tokens": 100, "output_tokens": 50}}
    model = "anthropic:" + mock_provider.scenario("chat-budget", {"steps": [
        {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "1 + 1"}}], **step},
        {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "2 + 2"}}], **step},
        {"blocks": [{"type": "text", "text": "Both done."}], **step}]})
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({model: {"input": 1, "output": 2}}))
    chat = start_chat(model, env_extra={"TURNSTREAM_BUDGET_TURN_TOKENS": "300", "TURNSTREAM_PRICES": str(prices)})
    chat.say("add things up")
    chat.expect(r"Budget reached: this turn has used \d+ tokens of its 300 tokens")
    chat.expect(r"Continue\? \[y/N\]")
    assert len(mock_provider.requests(model)) == 2  # the second call waits
    chat.child.sendline("y")
    chat.expect("Both done.")
    # 3 steps of 100 in and 50 out, at $1 and $2 per million: $0.0006 (cache tokens are unpriced here).
    chat.expect(r"↳ 300 in · 150 out · .*\$0\.0006 · 3 steps")
    chat.expect(terminal.PROMPT)
    chat.child.sendline("bye")
    assert chat.expect_exit() == 0


def test_a_line_typed_while_the_turn_runs_reaches_its_next_step(
        mock_provider: MockHandle, start_chat: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    model = "anthropic:" + mock_provider.scenario("chat-steer-step", terminal.step_scenario(gate))
    chat = start_chat(model)

    def asked_once() -> None:
        assert len(mock_provider.requests(model)) == 1

    terminal.type_while_held(chat, gate, "what is 6 * 7?", terminal.STEERED_LINE, asked_once)
    chat.expect(r"you, while it worked ›\S* use metric units")
    chat.expect("Done: 42")
    chat.say("bye")
    assert chat.expect_exit() == 0
    terminal.assert_read_by_the_next_step(mock_provider.requests(model))
    assert [(inp, status) for _, inp, status in chat.turns()] == [("what is 6 * 7?", "complete")]


def test_a_line_typed_during_the_last_step_is_the_next_message(
        mock_provider: MockHandle, start_chat: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    model = "anthropic:" + mock_provider.scenario("chat-steer-last", terminal.last_step_scenario(gate))
    chat = start_chat(model)
    terminal.type_while_held(chat, gate, "hello", terminal.LATE_LINE)
    chat.expect("not read by this turn, so it is your next message: and the weather\\?")
    chat.expect("Next turn: and the weather\\?")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert [(inp, status) for _, inp, status in chat.turns()] == [
        ("hello", "complete"), ("and the weather?", "complete")]
