"""``/retry``, ``/edit`` and ``/branches`` in ``turnstream chat`` under a real pseudo-terminal
(issue 28, point 6; docs/terminal.md), in local mode and against ``turnstream serve``.

The model is ``turnstream mock-provider``, answering each message with its text; what it was sent
(its request log) shows which branch a turn read, and the stored tree (the chat's SQLite file, or
``GET /api/sessions/{id}``) shows every version kept.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support import terminal
from tests.support.mock_provider import MockHandle
from tests.support.server import Server, start_server
from tests.support.terminal import Chat

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")]

BIN = Path(sys.executable).parent / "turnstream"
ECHO: dict[str, Any] = {"fragment_size": 4, "steps": [{"blocks": [{"type": "text", "text": "You said: {{input}}"}]}]}


def _texts(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each text in a request's messages, in order (the Anthropic wire format)."""
    out: list[tuple[str, str]] = []
    for m in request["messages"]:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [(m["role"], b["text"]) for b in blocks if b.get("type") == "text"]
    return out


def _spawn(args: list[str], env: dict[str, str]) -> pexpect.spawn:
    env = dict(env, TERM="xterm", COLUMNS="200")
    return pexpect.spawn(str(BIN), args, env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))


@pytest.fixture
def children() -> Iterator[list[pexpect.spawn]]:
    started: list[pexpect.spawn] = []
    yield started
    for child in started:
        if child.isalive():
            child.terminate(force=True)


def _retry_edit_switch(chat: Chat, sent: Any) -> None:
    """The same conversation in both modes: one, two; /retry two; /edit two into "two, edited";
    /branches lists three branches; /branches 1 goes back to the first "two"; three follows it.
    ``sent()`` is the model's requests so far."""
    chat.say("one")
    chat.expect("You said: one")
    chat.say("two")
    chat.expect("You said: two")
    assert len(sent()) == 2

    chat.say("/retry")
    chat.expect("answering again: two")
    chat.expect("You said: two")
    requests = sent()
    assert len(requests) == 3  # a second answer, from the same transcript as the first
    assert _texts(requests[2]) == _texts(requests[1]) == [("user", "one"), ("assistant", "You said: one"),
                                                          ("user", "two")]
    chat.say("/branches")
    chat.expect("2 branch")
    chat.expect(r"  1\. [^\n]*you › two")  # the first answer is still there, and not the one shown
    chat.expect(r"▸ 2\. [^\n]*you › two")

    chat.say("/edit")
    chat.expect("edit › ")
    chat.expect("two")  # the last message, already typed
    chat.child.send(", edited\r")  # so this adds to it
    chat.expect("You said: two, edited")
    edited = sent()[-1]
    assert len(sent()) == 4
    assert _texts(edited) == [("user", "one"), ("assistant", "You said: one"), ("user", "two, edited")]

    chat.say("/edit")
    chat.expect("edit › ")
    chat.child.send("\x1b")  # Escape: nothing is sent
    chat.expect("edit cancelled")
    assert len(sent()) == 4
    chat.say("/edit")
    chat.expect("edit › ")
    chat.child.send("two, no")
    chat.child.sendintr()  # Ctrl-C gives up the edit, and is not half of leaving the chat
    chat.expect("edit cancelled")
    chat.expect(terminal.PROMPT)
    chat.child.sendintr()
    chat.expect("press Ctrl-C again")
    assert len(sent()) == 4

    chat.say("/branches")
    chat.expect("3 branch")
    chat.expect(r"  1\. [^\n]*you › two ")
    chat.expect(r"  2\. [^\n]*you › two ")
    chat.expect(r"▸ 3\. [^\n]*you › two, edited")
    chat.say("/branches 1")
    chat.expect("now on branch 1 of 3")
    chat.expect("You said: two")
    chat.say("three")
    chat.expect("You said: three")
    assert _texts(sent()[-1]) == [("user", "one"), ("assistant", "You said: one"), ("user", "two"),
                                  ("assistant", "You said: two"), ("user", "three")]
    chat.say("/help")
    for command in ("/retry", "/edit", "/branches", "/attach", "/help"):
        chat.expect(command)
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert "Traceback" not in chat.seen


def test_local_retry_edit_and_switch(mock_provider: MockHandle, tmp_path: Path,
                                     children: list[pexpect.spawn]) -> None:
    model = "anthropic:" + mock_provider.scenario("branches-local", ECHO)
    home = tmp_path / "home"
    env = dict(os.environ, ANTHROPIC_BASE_URL=mock_provider.base_url, ANTHROPIC_API_KEY="test-key",
               TURNSTREAM_HOME=str(home))
    child = _spawn(["chat", "--model", model, "--root", str(tmp_path), "--session", "tree"], env)
    children.append(child)
    _retry_edit_switch(Chat(child), lambda: mock_provider.requests(model))

    with sqlite3.connect(home / "chat.db") as db:
        turns = db.execute("SELECT id, input, parent_turn_id FROM turns WHERE session_id = 'tree' "
                           "ORDER BY created_at").fetchall()
        leaf = db.execute("SELECT current_leaf FROM sessions WHERE id = 'tree'").fetchone()[0]
    one, two, again, edited, three = turns
    assert [t[1] for t in turns] == ["one", "two", "two", "two, edited", "three"]
    assert two[2] == again[2] == edited[2] == one[0]  # three versions after "one"
    assert three[2] == two[0] and leaf == three[0]  # "three" follows the first "two", the branch shown

    # Resumed, the chat shows the branch it was on, not the turns of the others.
    child = _spawn(["chat", "--model", model, "--root", str(tmp_path), "--session", "tree"], env)
    children.append(child)
    resumed = Chat(child)
    resumed.expect("3 earlier turn")
    resumed.say("bye")
    assert resumed.expect_exit() == 0
    assert "edited" not in resumed.seen


def test_edit_without_a_terminal_takes_the_next_line(tmp_path: Path) -> None:
    """Piped input cannot be pre-filled: the last message is shown and the next line replaces it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TURNSTREAM_"))}
    env["TURNSTREAM_HOME"] = str(tmp_path / "home")
    done = subprocess.run([str(BIN), "chat", "--model", "scripted:echo", "--root", str(tmp_path)],
                          input="first try\n/edit\nsecond try\n/edit third try\n/branches\nbye\n",
                          capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "your last message: first try" in out
    assert "You said: second try" in out
    assert "You said: third try" in out  # /edit TEXT: sent at once
    assert "3 branch(es)" in out
    assert "  2. turn 1 · you › second try" in out
    assert "▸ 3. turn 1 · you › third try" in out


@pytest.fixture(scope="module")
def server(mock_provider: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("serve-branches")
    srv = start_server(workdir, model="anthropic:" + mock_provider.scenario("branches-server-default", ECHO),
                       env={"ANTHROPIC_BASE_URL": mock_provider.base_url, "ANTHROPIC_API_KEY": "test-key"})
    try:
        yield srv
    finally:
        srv.stop()


def test_server_mode_retry_edit_and_switch(mock_provider: MockHandle, server: Server, tmp_path: Path,
                                           children: list[pexpect.spawn]) -> None:
    model = "anthropic:" + mock_provider.scenario("branches-server", ECHO)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "TURNSTREAM_"))}
    env["TURNSTREAM_HOME"] = str(tmp_path / "home")
    child = _spawn(["chat", "--server", server.url, "--key", server.key, "--root", str(tmp_path),
                    "--model", model], env)
    children.append(child)
    chat = Chat(child)
    chat.expect(r"session (ses_[A-Za-z0-9_-]+)")
    match = child.match
    assert match is not None and not isinstance(match, type)
    sid = str(match.group(1))
    _retry_edit_switch(chat, lambda: mock_provider.requests(model))

    with server.client() as c:
        detail = c.get(f"/api/sessions/{sid}").json()
    turns = detail["turns"]
    assert [t["input"] for t in turns] == ["one", "two", "two", "two, edited", "three"]
    one, two, again, edited, three = turns
    assert two["parent_turn_id"] == again["parent_turn_id"] == edited["parent_turn_id"] == one["id"]
    assert three["parent_turn_id"] == two["id"] and detail["current_leaf"] == three["id"]

    # A branch switched to elsewhere (the web chat, any client) is the one the terminal shows.
    with server.client() as c:
        assert c.put(f"/api/sessions/{sid}/current", json={"turn_id": edited["id"]}).status_code == 200
    child = _spawn(["chat", "--server", server.url, "--key", server.key, "--root", str(tmp_path),
                    "--session", sid], env)
    children.append(child)
    resumed = Chat(child)
    resumed.expect("2 earlier turn")  # the branch ending at "two, edited": not the one with "three"
    resumed.expect(r"you ›(\x1b\[0m)? two, edited")
    resumed.say("/branches")
    resumed.expect(r"  1\. [^\n]*you › two ")  # the ends of the branches, oldest first: the second "two"
    resumed.expect(r"▸ 2\. [^\n]*you › two, edited")
    resumed.expect(r"  3\. [^\n]*turn 3 [^\n]*you › three")
    resumed.say("bye")
    assert resumed.expect_exit() == 0
