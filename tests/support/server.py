"""Drive a real ``turnstream serve`` process: start it, talk HTTP/SSE to it, stop it.

The server is a subprocess on a free port (``--port 0``; the address is read from the line
it prints). Its stdout is a pipe, not a terminal, so that line has no key: the login key is
read from the key file the line names, as a service manager's user would. Nothing here sleeps
to wait: reads block on the process's output or on the socket, each with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx

from turnstream.sse_decoder import SSEDecoder

READY = re.compile(r"^turnstream serving .* on (http://[^/#\s]+)/ ")


@dataclass
class Event:
    id: str
    event: str
    data: dict[str, Any]

    @property
    def n(self) -> int:
        return int(self.id.rpartition(":")[2])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    key: str
    db: str
    log: Path
    output: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    """API keys of this server's users (the login key, and those ``add_user`` made): none may
    ever appear in its log or its stdout, which ``stop`` checks."""
    unread: bytes = b""
    """What the server printed after its address line, read with it (``stop`` adds it to ``output``)."""

    def client(self, key: str | None = None, *, timeout: float = 30.0, **kw: Any) -> httpx.Client:
        k = self.key if key is None else key
        headers = {"Authorization": f"Bearer {k}"} if k else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=httpx.Timeout(timeout), **kw)

    def add_user(self, name: str, workdir: Path) -> str:
        """A new user of this server's database; returns its key (and watches for it in the log)."""
        key = add_user(self.db, name, workdir)
        self.keys.append(key)
        return key

    def stop(self) -> int:
        """Stop the server; fails if one of its users' keys is anywhere in what it wrote: its
        log (stderr) or its stdout, which is a log too under a service manager."""
        try:
            return self._stop()
        finally:
            written = self.log_text() + "\n".join(self.output)
            leaked = [k[:6] + "…" for k in [self.key, *self.keys] if k and k in written]
            assert not leaked, f"API keys in the server's log or stdout: {leaked}"

    def _stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            rest = self.unread + _rest_of(self.proc.stdout.fileno())
            self.output += rest.decode(errors="replace").splitlines()
            self.proc.stdout.close()
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def _rest_of(fd: int) -> bytes:
    """What is left in a pipe whose writer exited (without waiting for a process it may have
    passed the pipe on to)."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _read_until(proc: subprocess.Popen[bytes], pattern: re.Pattern[str], timeout: float,
                seen: list[str]) -> tuple[re.Match[str], bytes]:
    """Read the process's stdout (unbuffered, straight from the pipe) until a line matches;
    the match and what was read after its line."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                seen.append(text)
                m = pattern.search(text)
                if m:
                    return m, buf
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise TimeoutError(f"the server did not print its address in {timeout}s: {seen}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the server exited ({proc.wait()}): {seen}")
            buf += chunk
    finally:
        sel.close()


def start_server(workdir: Path, *, db: str | None = None, model: str | None = None,
                 env: dict[str, str] | None = None, name: str = "server") -> Server:
    db = db or f"sqlite:///{workdir / 'turnstream.db'}"
    args = [sys.executable, "-m", "turnstream.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--db", db]
    if model:
        args += ["--model", model]
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TURNSTREAM_MODEL", "TURNSTREAM_DB")}
    full_env.update({"TURNSTREAM_KEY_FILE": str(workdir / f"{name}.key"), "TURNSTREAM_LOG_LEVEL": "INFO",
                     "PYTHONUNBUFFERED": "1"})
    if model and model.startswith("scripted:") and "/" in model:
        # sessions may name the other scenario files kept beside the server's own
        full_env["TURNSTREAM_SCENARIO_DIR"] = str(Path(model.split(":", 1)[1]).parent)
    full_env.update(env or {})
    log = workdir / f"{name}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, env=full_env, cwd=workdir)
    seen: list[str] = []
    try:
        m, unread = _read_until(proc, READY, 60, seen)
    except BaseException as exc:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        raise RuntimeError(f"server failed to start ({exc}); log:\n" + log.read_text()) from None
    key_file = full_env["TURNSTREAM_KEY_FILE"]
    assert f" {key_file} " in m.string, f"the address line does not say where the key is: {m.string}"
    key = Path(key_file).read_text().strip()
    return Server(proc, m.group(1), key, db, log, seen, [key], unread)


def add_user(db: str, name: str, workdir: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "turnstream.cli", "users", "add", name, "--db", db],
                         capture_output=True, text=True, check=True, cwd=workdir, timeout=60)
    m = re.search(r"API key \(shown once\): (\S+)", out.stdout)
    assert m, out.stdout + out.stderr
    return m.group(1)


# SSE ------------------------------------------------------------------------------------------

class EventStream:
    """An open SSE response, read event by event (comments counted as pings)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._decoder = SSEDecoder()
        self._pending: list[Event] = []
        self._chunks = response.iter_raw()
        self.pings = 0
        self.raw = b""

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while not self._pending:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                for ev in self._decoder.flush():
                    self._pending.append(_event(ev.id, ev.event, ev.data))
                if not self._pending:
                    raise
                break
            self.raw += chunk
            self.pings += chunk.count(b": ping")
            for ev in self._decoder.feed(chunk):
                self._pending.append(_event(ev.id, ev.event, ev.data))
        return self._pending.pop(0)

    def until(self, name: str) -> list[Event]:
        out = []
        for ev in self:
            out.append(ev)
            if ev.event == name:
                return out
        raise AssertionError(f"stream ended before {name}: {[e.event for e in out]}")

    def rest(self) -> list[Event]:
        return list(self)


def _event(id_: str | None, name: str, data: str) -> Event:
    return Event(id_ or "", name, json.loads(data) if data else {})


@contextmanager
def sse(client: httpx.Client, method: str, url: str, **kw: Any) -> Iterator[EventStream]:
    with client.stream(method, url, **kw) as r:
        if r.status_code != 200:
            r.read()
            raise AssertionError(f"{method} {url}: {r.status_code} {r.text}")
        assert r.headers["content-type"].startswith("text/event-stream")
        yield EventStream(r)


def follow_after(client: httpx.Client, sid: str, last_event_id: str) -> list[Event]:
    """The rest of a turn that an answer resumed: its events after ``last_event_id`` (the
    ``last_event_id`` a tool-results reply names), to the end of the turn."""
    tid = last_event_id.rpartition(":")[0]
    with sse(client, "GET", f"/api/sessions/{sid}/turns/{tid}/events", headers={"Last-Event-ID": last_event_id}) as s:
        return s.rest()


def new_session(client: httpx.Client, **body: Any) -> str:
    r = client.post("/api/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def run_turn(client: httpx.Client, sid: str, message: str, **body: Any) -> list[Event]:
    with sse(client, "POST", f"/api/sessions/{sid}/turns", json={"message": message, **body}) as s:
        return s.rest()


def scenario(path: Path, doc: dict[str, Any]) -> str:
    """Write a scenario file; return the ``scripted:`` model that plays it."""
    path.write_text(json.dumps(doc))
    return f"scripted:{path}"


# What the server suites play, and how they read its log -------------------------------------

LONG_TEXT = " ".join(f"word{i}" for i in range(240))

SCENARIOS: dict[str, dict[str, Any]] = {
    "chain": {"name": "chain", "fragment_size": 4, "steps": [
        {"blocks": [{"type": "text", "text": "Adding first."},
                    {"type": "tool_use", "name": "calculator", "input": {"expression": "2+3"}}]},
        {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "{{last}}*10"}}]},
        {"blocks": [{"type": "text", "text": "The result is {{last}}."}]}]},
    "client": {"name": "client", "fragment_size": 5, "steps": [
        {"blocks": [{"type": "text", "text": "Let me ask your browser."},
                    {"type": "tool_use", "name": "get_location", "input": {"precision": "city"}}]},
        {"blocks": [{"type": "text", "text": "You are in {{last}}."}]}]},
    "parallel": {"name": "parallel", "fragment_size": 5, "steps": [
        {"blocks": [{"type": "tool_use", "name": "get_location", "input": {}},
                    {"type": "tool_use", "name": "get_time", "input": {"tz": "local"}}]},
        {"blocks": [{"type": "text", "text": "{{results[0]}} at {{results[1]}}"}]}]},
    "approval": {"name": "approval", "fragment_size": 8, "steps": [
        {"blocks": [{"type": "text", "text": "I will delete that cell."},
                    {"type": "tool_use", "name": "delete_cell", "input": {"cell_id": "cell_missing"}}]},
        {"blocks": [{"type": "text", "text": "Outcome: {{last}}"}]}]},
    "notebook": {"name": "notebook", "fragment_size": 8, "steps": [
        {"blocks": [{"type": "tool_use", "name": "create_cell", "input": {"code": "x = 1 + 1"}}]},
        {"blocks": [{"type": "text", "text": "Created: {{last}}"}]}]},
    "slow": {"name": "slow", "fragment_size": 12, "delay_ms": 8, "steps": [
        {"blocks": [{"type": "thinking", "thinking": "Thinking it over.", "signature": "sig"},
                    {"type": "text", "text": LONG_TEXT}]}]},
    "echo": {"name": "echo", "fragment_size": 6,
             "steps": [{"blocks": [{"type": "text", "text": "You said: {{input}}"}]}]},
}


def server_errors(srv: Server) -> list[str]:
    """Error lines of the server's log, except a tool's own failure (a result for the model)."""
    out = []
    for line in srv.log_text().split("\n"):
        if not line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if doc.get("level") in ("error", "critical") and doc.get("logger") != "turnstream.tools":
            out.append(line)
    return out


def mcp_stderr(srv: Server) -> list[tuple[str, str]]:
    """What the server's stdio MCP servers wrote on their standard error, as (server, line), read
    from its log's ``turnstream.mcp.server`` records; every line of that log must be JSON."""
    out = []
    for line in srv.log_text().splitlines():
        doc = json.loads(line)  # a raw line here is the failure this checks for
        if doc.get("logger") == "turnstream.mcp.server":
            name = doc["mcp_server"]
            assert doc["level"] == "info" and doc["msg"].startswith(f"[{name}] "), doc
            out.append((name, doc["msg"].removeprefix(f"[{name}] ")))
    return out


@contextmanager
def server_pair(workdir: Path, db: str, model: str,
                env: dict[str, str] | None = None) -> Iterator[tuple[Server, Server]]:
    """Two ``turnstream serve`` processes, ``a`` and ``b``, on one database and one login key; both
    stopped at the end, with no error in either log."""
    env = {"TURNSTREAM_KEY_FILE": str(workdir / "shared.key"), **(env or {})}
    a = start_server(workdir, db=db, model=model, env=env, name="a")
    try:
        b = start_server(workdir, db=db, model=model, env=env, name="b")
    except BaseException:
        a.stop()
        raise
    try:
        assert a.key == b.key
        yield a, b
    finally:
        b.stop()
        a.stop()
        assert server_errors(a) == []
        assert server_errors(b) == []
