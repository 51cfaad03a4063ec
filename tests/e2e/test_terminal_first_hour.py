"""The terminal chat as a new user meets it (issue 16, points 10-12), in a real pseudo-terminal:
offline, ``turnstream chat`` shows its tools at work on ``--root``; against a ``make serve``
server (the offline demo) it gets answers its tools fit, not "Unknown tool"; and Ctrl-C in the
middle of an answer leaves that answer on the screen once.

What the user sees is checked on a screen: the chat's raw output is played into ``pyte``, a
terminal emulator, so a line drawn twice or a blank line too many shows as it would."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pyte
import pytest

from tests.support.mock_provider import MockHandle
from tests.support.server import Server, start_server
from tests.support.terminal import PROMPT, Chat

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")]

BIN = Path(sys.executable).parent / "turnstream"
ROWS, COLS = 40, 100


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "project"
    r.mkdir()
    (r / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    (r / "setup.py").write_text("from setuptools import setup\n", encoding="utf-8")
    return r


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    children: list[pexpect.spawn] = []

    def start(*args: str, **env: str) -> tuple[Chat, io.StringIO]:
        full = {k: v for k, v in os.environ.items() if not k.startswith(("TURNSTREAM_", "ANTHROPIC_", "OPENAI_"))}
        full.update(TURNSTREAM_HOME=str(tmp_path / "home"), TERM="xterm", COLUMNS=str(COLS), LINES=str(ROWS), **env)
        child = pexpect.spawn(str(BIN), list(args), env=full, encoding="utf-8", timeout=30, dimensions=(ROWS, COLS))
        children.append(child)
        child.logfile_read = out = io.StringIO()
        return Chat(child), out

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)


def screen_of(raw: str) -> list[str]:
    """The lines a terminal of ROWS x COLS shows after ``raw`` (the pty already turned each
    newline into CR LF), scrolled-off lines included, trailing blanks dropped."""
    screen = pyte.HistoryScreen(COLS, ROWS, history=1000)
    pyte.Stream(screen).feed(raw)
    above = ["".join(ch.data for ch in line.values()) if isinstance(line, dict) else
             "".join(line[x].data for x in range(COLS)) for line in screen.history.top]
    lines = [ln.rstrip() for ln in [*above, *screen.display]]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def test_offline_the_chat_demo_uses_its_tools_on_the_root(spawn: Any, root: Path) -> None:
    chat, _ = spawn("chat", "--root", str(root))
    chat.expect("offline demo")
    chat.say("what is here?")
    chat.expect("list_directory")
    chat.expect("notes.txt")
    chat.expect("setup.py")
    chat.expect("calculator")
    chat.expect("126")
    chat.expect("read <file>")
    chat.say("read notes.txt")
    chat.expect("remember the milk")
    chat.say("what is 2**10 / 8?")
    chat.expect("128")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert "Unknown tool" not in chat.seen and "Traceback" not in chat.seen


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``turnstream serve`` as ``make serve`` runs it without a key: the offline demo."""
    srv = start_server(tmp_path_factory.mktemp("demo-serve"))
    try:
        yield srv
    finally:
        srv.stop()


def test_the_server_demo_fits_a_terminal_client(spawn: Any, root: Path, demo_server: Server) -> None:
    chat, out = spawn("chat", "--server", demo_server.url, "--key", demo_server.key, "--root", str(root))
    chat.say("what is here?")  # a tour of this client's own tools, run here
    chat.expect("list_directory")
    chat.expect("notes.txt")
    chat.expect("126")
    chat.say("Create an example notebook with some data analysis")  # no notebook here: still its tools
    chat.expect("list_directory")
    chat.expect(PROMPT)
    chat.child.sendline("read notes.txt")
    chat.expect("remember the milk")
    chat.say("bye")
    assert chat.expect_exit() == 0
    assert "Unknown tool" not in out.getvalue() and "error" not in out.getvalue().lower()


@pytest.mark.parametrize("intro", ["", "Intro line.\n\n"], ids=["one-paragraph", "second-paragraph"])
def test_ctrl_c_mid_answer_leaves_the_partial_answer_on_screen_once(
        spawn: Any, root: Path, mock_provider: MockHandle, intro: str) -> None:
    # The ^C the terminal echoes used to land after the live paragraph's last line, which filled
    # the screen's width: the redraw that followed started one line too low, so the paragraph's
    # first line showed twice (or, after an earlier paragraph, a blank line too many).
    words = "word " * 400
    model = "anthropic:" + mock_provider.scenario(f"first-hour-ctrl-c-{len(intro)}", {
        "fragment_size": 5, "delay_ms": 25,
        "turns": [[{"blocks": [{"type": "text", "text": intro + "Starting. " + words}]}],
                  [{"blocks": [{"type": "text", "text": "Still here."}]}]]})
    chat, out = spawn("chat", "--model", model, "--root", str(root),
                      ANTHROPIC_BASE_URL=mock_provider.base_url, ANTHROPIC_API_KEY="test-key")
    chat.say("talk a lot")
    chat.expect("Starting.")
    for _ in range(150):  # a few lines into the live paragraph (redraws repeat words: this is quick)
        chat.expect("word")
    chat.child.sendintr()
    chat.expect("cancelled")
    chat.say("are you there?")
    chat.expect("Still here.")
    chat.expect(PROMPT)
    lines = screen_of(out.getvalue())
    chat.child.sendline("bye")
    assert chat.expect_exit() == 0
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Starting.")]
    assert len(starts) == 1, "\n".join(lines)
    if intro:
        at = lines.index("Intro line.")
        assert lines[at + 1] == "" and starts[0] == at + 2, "one blank line between the paragraphs"
    else:
        assert lines[starts[0] - 1].endswith("talk a lot")
    cancelled = next(i for i, ln in enumerate(lines) if "cancelled" in ln)
    body = lines[starts[0]:cancelled]
    assert all(ln for ln in body), "\n".join(body)  # the paragraph, then the cancel line: no gap, no repeat
    shown = " ".join(body).split()
    assert shown[0] == "Starting." and set(shown[1:-1]) == {"word"} and "word".startswith(shown[-1])
