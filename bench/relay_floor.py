"""The relay floor: the least a server can spend on the server bench's turn, on turnstream's own
stack, so that ``bench/server_bench.py --floor`` can say what turnstream adds.

It serves the two routes the bench calls (``POST /api/sessions``, ``POST …/turns``) with the
same parts as ``turnstream serve``: Starlette under uvicorn with the same configuration (its
HTTP protocol with the header deadline, no access log), the same garbage-collector tuning, and
the provider's HTTP client as turnstream makes it (``providers.http.ClientPool``: one aiohttp
session, its connector and timeouts, bodies read as they arrive). Per turn it makes the same three
Anthropic requests to the mock provider, splits each response into SSE events and decodes each
event's JSON once, keeps only what the next request needs (the assistant's blocks, the
calculator's result), and writes every event to the client as an SSE event with a turnstream
name (``turn_start``, ``block_start``, ``block_delta``, ``block_stop``, ``turn_complete``), all
the events of one provider chunk in one write.

What it leaves out is what turnstream is for: no store, no bus, no assembly into validated
blocks, no partial JSON, no transcript checks, no retries, no admission, no auth.

``--store FILE`` makes it the **durable floor**: the least a server pays for the two promises
that make turnstream's turns outlive their clients (docs/guarantees.md): every event it sends,
except the live-only ones turnstream does not store either (block starts and deltas), is in
the database before it is sent, and a turn runs in a task of its own, so the response only
follows it (a client that leaves does not stop the turn). Sessions, turns and events are rows
in one SQLite file opened as turnstream opens its own (WAL, ``synchronous = NORMAL``, on the
event loop), and the writes asked for in one pass of the event loop commit together, as
turnstream's groups do. Still no bus, assembly, validation, retries, admission or auth, and
nothing reads the rows back.

    python bench/relay_floor.py --port 0 --key-file KEY [--store FILE]   # prints "relay floor on http://…/ "
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from turnstream.providers.http import ClientPool  # noqa: E402
from turnstream.server.hardening import header_deadline_protocol  # noqa: E402
from turnstream.server.main import _tune_gc  # noqa: E402
from turnstream.toolsets.calculator import evaluate  # noqa: E402

CALCULATOR = {"name": "calculator", "description": "Evaluate an arithmetic expression.",
              "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}},
                               "required": ["expression"]}}
MAX_STEPS = 10
Event = tuple[bytes, bytes]
"""An event's name and its JSON."""


class Relay:
    def __init__(self, base_url: str, api_key: str, model: str) -> None:
        self.url = base_url.rstrip("/") + "/v1/messages"
        self.headers = {"x-api-key": api_key, "anthropic-version": "2023-06-01",
                        "content-type": "application/json", "accept-encoding": "identity"}
        self.model = model
        self.pool = ClientPool()

    async def turn(self, message: str) -> AsyncIterator[list[Event]]:
        """The turn's events, in batches: those of one provider chunk together."""
        yield [(b"turn_start", b'{"turn_id":"t"}')]
        messages: list[dict[str, Any]] = [{"role": "user", "content": message}]
        for _ in range(MAX_STEPS):
            body = orjson.dumps({"model": self.model, "max_tokens": 4096, "messages": messages,
                                 "tools": [CALCULATOR], "stream": True})
            blocks: dict[int, dict[str, Any]] = {}
            inputs: dict[int, str] = {}
            stop_reason = None
            async with self.pool.post(self.url, body, self.headers) as resp:
                buf = b""
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    out: list[Event] = []
                    while (end := buf.find(b"\n\n")) >= 0:
                        frame, buf = buf[:end], buf[end + 2:]
                        at = frame.find(b"data: ")
                        if at < 0:
                            continue
                        ev = orjson.loads(frame[at + 6:])
                        kind = ev["type"]
                        if kind == "content_block_delta":
                            i, delta = ev["index"], ev["delta"]
                            if delta["type"] == "text_delta":
                                blocks[i]["text"] += delta["text"]
                                out.append((b"block_delta", orjson.dumps({"index": i, "text": delta["text"]})))
                            else:
                                inputs[i] += delta.get("partial_json", "")
                                out.append((b"block_delta", orjson.dumps(
                                    {"index": i, "partial_json": delta.get("partial_json", "")})))
                        elif kind == "content_block_start":
                            i, block = ev["index"], dict(ev["content_block"])
                            blocks[i] = block
                            inputs[i] = ""
                            out.append((b"block_start", orjson.dumps({"index": i, "type": block["type"]})))
                        elif kind == "content_block_stop":
                            i = ev["index"]
                            block = blocks[i]
                            if block["type"] == "tool_use":
                                block["input"] = orjson.loads(inputs[i] or "{}")
                            out.append((b"block_stop", orjson.dumps({"index": i, "block": block})))
                        elif kind == "message_delta":
                            stop_reason = ev["delta"].get("stop_reason")
                    if out:
                        yield out
            content = [blocks[i] for i in sorted(blocks)]
            messages.append({"role": "assistant", "content": content})
            calls = [b for b in content if b["type"] == "tool_use"]
            if stop_reason != "tool_use" or not calls:
                break
            results = []
            for call in calls:
                value = evaluate(str(call["input"].get("expression", "")))
                results.append({"type": "tool_result", "tool_use_id": call["id"], "content": str(value)})
                yield [(b"block_stop", orjson.dumps({"block": results[-1]}))]
            messages.append({"role": "user", "content": results})
        yield [(b"turn_complete", b'{"status":"complete"}')]


def numbered(batch: list[Event], n: int) -> bytes:
    """A batch as SSE events numbered from ``n + 1``, in one write."""
    return b"".join(b"id: t:%d\nevent: %s\ndata: %s\n\n" % (n + i, name, data)
                    for i, (name, data) in enumerate(batch, 1))


async def relayed(relay: Relay, message: str) -> AsyncIterator[bytes]:
    """The plain floor: each batch written as it comes."""
    n = 0
    async for batch in relay.turn(message):
        yield numbered(batch, n)
        n += len(batch)


LIVE_ONLY = (b"block_start", b"block_delta")
"""The events turnstream sends without storing (``lifecycle.TurnRecorder.emit``)."""


class Durable:
    """The durable floor's SQLite file and its writes (see the module doc)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS turns (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id),
                                              status TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS events (turn_id TEXT NOT NULL REFERENCES turns(id), n INTEGER NOT NULL,
                                               name TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (turn_id, n));
        """)
        self.tasks: set[asyncio.Task[None]] = set()
        self._group: list[tuple[list[tuple[str, tuple[Any, ...]]], asyncio.Future[None]]] = []

    def write(self, statements: list[tuple[str, tuple[Any, ...]]]) -> asyncio.Future[None]:
        """Committed with the others asked for in this pass of the event loop, in one transaction."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._group.append((statements, fut))
        if len(self._group) == 1:
            loop.call_soon(self._commit)
        return fut

    def _commit(self) -> None:
        group, self._group = self._group, []
        self.db.execute("BEGIN IMMEDIATE")
        for statements, _ in group:
            for sql, args in statements:
                self.db.execute(sql, args)
        self.db.execute("COMMIT")
        for _, fut in group:
            fut.set_result(None)

    def turn(self, relay: Relay, sid: str, message: str) -> AsyncIterator[bytes]:
        """Start the turn in a task of its own; the response reads what it has stored."""
        tid = "turn_" + secrets.token_hex(8)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        task = asyncio.create_task(self._run(relay, sid, tid, message, queue))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return self._follow(queue)

    async def _run(self, relay: Relay, sid: str, tid: str, message: str, queue: asyncio.Queue[bytes | None]) -> None:
        n = 0
        try:
            first = True
            async for batch in relay.turn(message):
                statements: list[tuple[str, tuple[Any, ...]]] = []
                if first:
                    statements.append(("INSERT INTO turns (id, session_id, status) VALUES (?, ?, 'running')",
                                       (tid, sid)))
                first = False
                for i, (name, data) in enumerate(batch, n + 1):
                    if name not in LIVE_ONLY:
                        statements.append(("INSERT INTO events (turn_id, n, name, data) VALUES (?, ?, ?, ?)",
                                           (tid, i, name.decode(), data)))
                    if name == b"turn_complete":
                        statements.append(("UPDATE turns SET status = 'complete' WHERE id = ?", (tid,)))
                if statements:
                    await self.write(statements)
                queue.put_nowait(numbered(batch, n))
                n += len(batch)
        finally:
            queue.put_nowait(None)

    @staticmethod
    async def _follow(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
        while (data := await queue.get()) is not None:
            yield data


def app(relay: Relay, durable: Durable | None) -> Starlette:
    async def session(request: Request) -> Response:
        await request.body()
        sid = "ses_" + secrets.token_hex(8)
        if durable is not None:
            await durable.write([("INSERT INTO sessions (id, created) VALUES (?, ?)", (sid, time.time()))])
        return JSONResponse({"id": sid}, status_code=201)

    async def turn(request: Request) -> Response:
        doc = orjson.loads(await request.body())
        message = str(doc["message"])
        stream = relayed(relay, message) if durable is None else \
            durable.turn(relay, request.path_params["sid"], message)
        return StreamingResponse(stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    return Starlette(routes=[Route("/api/sessions", session, methods=["POST"]),
                             Route("/api/sessions/{sid}/turns", turn, methods=["POST"])])


async def serve(port: int, key_file: Path, model: str, store: Path | None) -> None:
    relay = Relay(os.environ["ANTHROPIC_BASE_URL"], os.environ.get("ANTHROPIC_API_KEY", "x"), model)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    key_file.write_text(secrets.token_hex(8))
    durable = Durable(store) if store is not None else None
    print(f"relay floor on http://127.0.0.1:{sock.getsockname()[1]}/ (model {model})", flush=True)
    _tune_gc()
    # the configuration ``turnstream serve`` runs uvicorn with (turnstream/server/main.py)
    config = uvicorn.Config(app(relay, durable), log_config=None, access_log=False, lifespan="off",
                            timeout_graceful_shutdown=3, ws_ping_interval=20, http=header_deadline_protocol(10.0))
    await uvicorn.Server(config).serve(sockets=[sock])
    await relay.pool.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--key-file", type=Path, required=True)
    ap.add_argument("--model", default="bench-chain")
    ap.add_argument("--store", type=Path, default=None, metavar="FILE",
                    help="the durable floor: store what is sent in this SQLite file, turns in tasks of their own")
    a = ap.parse_args()
    try:
        import uvloop  # uvicorn's loop="auto" takes it when present, as for turnstream serve
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(a.port, a.key_file, a.model, a.store))


if __name__ == "__main__":
    main()
