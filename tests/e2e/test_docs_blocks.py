"""Every code block marked ``runnable`` in README.md and docs/*.md works as printed (issue 16,
point 9). The marker and how blocks run are described in docs/README.md: one fresh folder per
page, the page's blocks in order, background servers until the page ends, documented ports
replaced by free ones, a deadline on every block, local things only."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="runs bash")]

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PORTS = ("8000", "8001", "8080", "8765")
FENCE = re.compile(r"^```(?P<lang>\w+)[ \t]+runnable\b(?P<words>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
QUOTED = re.compile(r"^````.*?^````[ \t]*$", re.M | re.S)
"""A block shown inside a four-backtick fence is an example of the marker, not a block to run."""
FORBIDDEN = ("Traceback (most recent call last)", "Unknown tool")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    body: str
    stdin: str | None = None
    expect: str | None = None
    background: bool = False
    ready: str | None = None
    timeout: float = 60.0

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    text = QUOTED.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text(encoding="utf-8"))
    found = []
    for m in FENCE.finditer(text):
        block = Block(page.relative_to(ROOT).as_posix(), text.count("\n", 0, m.start()) + 1, m["lang"], m["body"])
        for word in shlex.split(m["words"]):
            key, _, value = word.partition("=")
            value = value.replace("\\n", "\n")
            if key == "background":
                block.background = True
            elif key in ("stdin", "expect", "ready"):
                setattr(block, key, value)
            elif key == "timeout":
                block.timeout = float(value)
            else:
                raise AssertionError(f"{block.where}: unknown word {word!r} after runnable")
        assert block.lang in ("sh", "python"), f"{block.where}: only sh and python blocks can run"
        assert not block.background or block.ready, f"{block.where}: a background block needs ready=\"…\""
        found.append(block)
    return found


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@dataclass
class Background:
    """A server a page started: its output is read by a thread, which says when it is ready."""

    block: Block
    proc: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def start(self) -> None:
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if self.block.ready and self.block.ready in line:
                self.ready.set()
        self.ready.set()  # it ended: whoever waits finds out below

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.reader is not None:
            self.reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def command(block: Block, script: str) -> list[str]:
    if block.lang == "python":
        return [sys.executable, "-c", script]
    return ["bash", "-e", "-o", "pipefail", "-c", script]


def page_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNSTREAM_", "ANTHROPIC_", "OPENAI_"))}
    bin_dir = str(Path(sys.executable).parent)
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200",
               PYTHONUNBUFFERED="1", TERM="dumb")
    return env


def test_the_readme_and_the_docs_have_runnable_blocks() -> None:
    counts = {p.relative_to(ROOT).as_posix(): len(blocks_of(p)) for p in PAGES}
    assert counts["README.md"] >= 3
    assert sum(counts.values()) >= 15, counts


@pytest.mark.parametrize("page", [p for p in PAGES if blocks_of(p)], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_runnable_blocks_work_as_printed(page: Path, tmp_path: Path) -> None:
    ports = {p: free_port() for p in PORTS}
    env = page_env(tmp_path)
    servers: list[Background] = []
    try:
        for block in blocks_of(page):
            script = re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda m: ports[m.group(1)], block.body)
            if block.background:
                proc = subprocess.Popen(command(block, script), cwd=tmp_path, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
                server = Background(block, proc)
                servers.append(server)
                server.start()
                ready = server.ready.wait(block.timeout) and proc.poll() is None
                assert ready, f"{block.where} did not print {block.ready!r}:\n{''.join(server.output)}"
                continue
            try:
                done = subprocess.run(command(block, script), cwd=tmp_path, env=env, text=True, input=block.stdin,
                                      stdin=None if block.stdin is not None else subprocess.DEVNULL,
                                      capture_output=True, timeout=block.timeout, start_new_session=True)
            except subprocess.TimeoutExpired as exc:
                raise AssertionError(f"{block.where} ran past {block.timeout:g} s:\n{exc.stdout}\n{exc.stderr}"
                                     ) from None
            out = done.stdout + done.stderr
            assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{out}"
            if block.expect is not None:
                assert block.expect in out, f"{block.where}: {block.expect!r} not in its output:\n{out}"
            bad = [f for f in FORBIDDEN if f in out]
            assert not bad, f"{block.where} printed {bad}:\n{out}"
    finally:
        for server in servers:
            server.stop()
    for server in servers:
        log = "".join(server.output)
        assert "Traceback (most recent call last)" not in log, f"{server.block.where}:\n{log}"
