"""The server under N concurrent turns: throughput, time to first event, added latency per
event, CPU, memory.

One ``turnstream serve`` process (SQLite in a temporary directory, or PostgreSQL with ``--pg``: a
scratch schema, dropped afterwards) runs N turns at once,
each a three-step chain (text + calculator call, calculator call, answer) from its own
session, streamed over SSE to client processes. The model is the mock provider
(``turnstream mock-provider``, a separate process, reached by the Anthropic adapter through
``ANTHROPIC_BASE_URL``), paced like a real model: one frame every ``--delay-ms`` (25 ms:
40 events/s per turn).

Added latency per event is measured, not inferred: every text fragment of the scenario is
the template ``{{sent_at}}``, which the mock provider replaces with the wall-clock time at
which it hands the frame over (``turnstream/mock/server.py``). The client subtracts that
stamp from the time the ``block_delta`` carrying it arrives. Both processes read the same
clock, so the difference is exactly what turnstream adds for that event: reading the
provider's stream, assembling, the bus, SSE encoding, HTTP, and waiting for the CPU behind
the other turns' work (the model's own time is not in it). Events that carry no stamp
(block starts and stops, tool calls, results) travel the same path.

Also measured: time to first event (POST sent -> ``turn_start`` received); turn duration
against the same turn alone (N = 1); throughput; the CPU every process used (server, mock,
clients) and the machine's load; server RSS (peak and after the run).

Past what one core carries, the server admits new turns as running ones end
(``turnstream/server/admission.py``): a turn that waits at the door waits before its
``turn_start``, so that wait shows in the time to first event and the turn duration (both
counted from the POST), never in the added latency per event. ``TURNSTREAM_ADMIT_MAX_LAG_MS=0``
in the environment turns the gate off for comparison.

Targets (issue 5): no errors, p99 added latency per event < 50 ms, RSS < 1 GiB at N = 1,000.

``--floor`` runs the relay floor (``bench/relay_floor.py``: the same HTTP stack, client pool
and GC tuning, relaying the same three provider requests per turn with no store, bus or
assembly) beside turnstream, interleaved in one session (turnstream, floor, turnstream, floor …
for ``--rounds`` rounds at each N), and prints the server CPU per turn of each and the ratio
(medians over the rounds). Target (issue 25): at most 1.25x at N = 100 and N = 1,000.
``--durable`` adds the durable floor (``relay_floor.py --store``: the relay that also stores what
it sends before sending it and runs each turn in a task of its own) to the rotation, and the
ratios against it: what the two promises that let a turn outlive its client cost by themselves.

    python bench/server_bench.py [--n 100 1000] [--delay-ms 25] [--ramp-s 1] [--quick]
                                 [--floor [--durable] [--rounds 3]]
                                 [--pg postgresql://postgres@127.0.0.1:5432/postgres]

With ``--pg`` the CPU columns are still the turnstream process's alone; PostgreSQL's own processes
are not in them.

The turns start spread evenly over ``--ramp-s`` seconds (users do not all press enter in
the same millisecond); every turn lasts longer than the ramp, so all N run at once.
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx2 as httpx  # noqa: E402

STAMP = "{{sent_at}}"


def scenario(first_text: int, answer_text: int, delay_ms: float) -> dict[str, Any]:
    """The chain, its text made of send-time stamps (one per fragment)."""
    return {
        "name": "bench-chain", "fragment_size": len(STAMP), "delay_ms": delay_ms,
        "steps": [
            {"blocks": [{"type": "text", "text": STAMP * first_text},
                        {"type": "tool_use", "name": "calculator", "input": {"expression": "17 + 25"}}],
             "usage": {"input_tokens": 40, "output_tokens": 12}},
            {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "{{last}} * 3"}}],
             "usage": {"input_tokens": 60, "output_tokens": 9}},
            {"blocks": [{"type": "text", "text": STAMP * answer_text}],
             "usage": {"input_tokens": 80, "output_tokens": 14}},
        ],
    }


READY = re.compile(rb"on (http://[^/#\s]+)/ ")
"""The address line (stdout is a pipe here, so the key is only in the key file)."""
STAMPS = re.compile(rb"\d{10}\.\d{6}")
MAX_REFUSALS = 30
"""A client sends a turn refused at capacity (503) again up to this many times."""


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_line(proc: subprocess.Popen[bytes], pattern: re.Pattern[bytes], timeout: float) -> re.Match[bytes]:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    buf, deadline = b"", time.monotonic() + timeout
    try:
        while True:
            m = pattern.search(buf)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise TimeoutError(f"no {pattern.pattern!r} in {timeout}s: {buf[-2000:]!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"process exited ({proc.wait()}): {buf[-2000:]!r}")
            buf += chunk
    finally:
        sel.close()


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            fields[k] = int(v.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return float(sum(parts) - idle), float(sum(parts))


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


# the client: a lean HTTP/1.1 + SSE reader, so that the clients' CPU stays small -----------------

class TurnStream(asyncio.Protocol):
    """One ``POST …/turns`` read to its ``turn_complete``: per event, the receive time; per
    stamped delta, receive time minus send stamp."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.buf = b""
        self.head: bytes | None = None
        self.chunk_left = 0
        self.crlf_left = 0
        self.body = b""
        self.sent_at = 0.0
        self.first: float | None = None
        self.added: list[float] = []
        self.events = 0
        self.status: str | None = None
        self.error: str | None = None
        self.retry_after: float | None = None
        """Set when the server answered 503 (at capacity) with this Retry-After."""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.sent_at = time.time()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self.buf += data
        if self.head is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.head, self.buf = self.buf[:end], self.buf[end + 4:]
            status = self.head.split(b" ", 2)[1]
            if status == b"503":  # at capacity: the client waits as asked and sends it again
                m = re.search(rb"(?i)\r\nretry-after: *(\d+)", self.head)
                self.retry_after = float(m.group(1)) if m else 1.0
            if status != b"200" or b"transfer-encoding: chunked" not in self.head.lower():
                self._fail(f"HTTP {status.decode()}: {self.head[:200]!r}")
                return
        # de-chunk: size line, data, CRLF
        while self.buf:
            if self.crlf_left:
                skip = min(self.crlf_left, len(self.buf))
                self.buf, self.crlf_left = self.buf[skip:], self.crlf_left - skip
                continue
            if self.chunk_left == 0:
                line_end = self.buf.find(b"\r\n")
                if line_end < 0:
                    break
                size = int(self.buf[:line_end].split(b";")[0], 16)
                self.buf = self.buf[line_end + 2:]
                if size == 0:
                    self.buf = b""
                    break
                self.chunk_left = size
            take = self.buf[:self.chunk_left]
            self.body += take
            self.buf = self.buf[len(take):]
            self.chunk_left -= len(take)
            if self.chunk_left == 0:
                self.crlf_left = 2
        # SSE events
        while True:
            end = self.body.find(b"\n\n")
            if end < 0:
                break
            ev, self.body = self.body[:end], self.body[end + 2:]
            if ev.startswith((b":", b"retry:")):
                continue
            self.events += 1
            if self.first is None:
                self.first = now - self.sent_at
            name_at = ev.find(b"\nevent: ") + 8
            name = ev[name_at:ev.find(b"\n", name_at)]
            if name == b"block_delta":
                self.added.extend(now - float(s) for s in STAMPS.findall(ev))
            elif name == b"turn_complete":
                data = json.loads(ev[ev.find(b"\ndata: ") + 7:])
                self.status = data["status"]
                if self.transport is not None:
                    self.transport.close()
                if not self.done.done():
                    self.done.set_result(None)

    def _fail(self, why: str) -> None:
        self.error = why
        if self.transport is not None:
            self.transport.close()
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.error = self.error or f"connection closed after {self.events} events ({exc})"
            self.done.set_result(None)


async def _one_turn(host: str, port: int, key: str, sid: str, start_at: float) -> dict[str, Any]:
    body = json.dumps({"message": "compute"}).encode()
    request = (f"POST /api/sessions/{sid}/turns HTTP/1.1\r\nHost: {host}:{port}\r\n"
               f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
               f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    delay = start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    loop = asyncio.get_running_loop()
    t0 = time.time()
    refused = 0
    while True:
        try:
            _, proto = await loop.create_connection(lambda: TurnStream(request), host, port)
            await asyncio.wait_for(proto.done, 300)
        except (OSError, TimeoutError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}", "refused": refused}
        if proto.retry_after is None or refused >= MAX_REFUSALS:
            break
        refused += 1  # a 503 at capacity: wait as asked, then send the turn again
        await asyncio.sleep(proto.retry_after)
    if proto.error:
        return {"error": proto.error, "refused": refused}
    if proto.status != "complete":
        return {"error": f"turn ended {proto.status!r} after {proto.events} events", "refused": refused}
    return {"first": proto.first, "added": proto.added, "events": proto.events, "duration": time.time() - t0,
            "end": time.time(), "refused": refused}


async def _worker(url: str, key: str, n: int, model: str, starts: list[float]) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"},
                                 timeout=httpx.Timeout(120.0)) as client:
        sids = []
        for _ in range(n):
            r = await client.post("/api/sessions", json={"model": model, "toolset": "calculator"})
            r.raise_for_status()
            sids.append(r.json()["id"])
    host, _, port = url.removeprefix("http://").rpartition(":")
    cpu0 = time.process_time()
    results = list(await asyncio.gather(*(_one_turn(host, int(port), key, s, t)
                                          for s, t in zip(sids, starts, strict=True))))
    return {"results": results, "cpu_s": time.process_time() - cpu0}


def worker_main(args: tuple[str, str, int, str, list[float]]) -> dict[str, Any]:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    return asyncio.run(_worker(*args))


# one run ------------------------------------------------------------------------------------------

def run_once(n: int, url: str, key: str, model: str, pids: dict[str, int], workers: int,
             ramp_s: float, profile: Path | None = None, label: str = "server") -> dict[str, Any]:
    workers = max(1, min(workers, n))
    start_at = time.time() + 1.5 + n / 400  # time for every worker to create its sessions
    starts = [start_at + ramp_s * i / n for i in range(n)]
    parts = [starts[i::workers] for i in range(workers)]
    server = pids["server"]
    peak_rss = 0
    with mp.get_context("fork").Pool(workers) as pool:
        pending = pool.map_async(worker_main, [(url, key, len(p), model, p) for p in parts])
        while time.time() < start_at:
            pending.wait(0.05)
        spy = None
        if profile is not None:  # py-spy (pip install py-spy; not a dependency) samples the server
            out = str(profile / f"{label}-{n}.txt")
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(server),
                                    "-r", "1000", "--nonblocking", "-f", "raw", "-o", out],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu0 = {k: cpu_s(pid) for k, pid in pids.items()}
        busy0 = machine_busy()
        t0 = time.time()
        while not pending.ready():
            pending.wait(0.2)
            peak_rss = max(peak_rss, rss_kib(server)[0])
            if time.time() - t0 > 600:
                raise TimeoutError(f"N={n}: not done after 600 s")
        wall = time.time() - t0
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        cpu = {k: cpu_s(pid) - cpu0[k] for k, pid in pids.items()}
        busy1 = machine_busy()
        parts_out = pending.get()
    results = [r for part in parts_out for r in part["results"]]
    client_cpu = sum(part["cpu_s"] for part in parts_out)
    errors = [r["error"] for r in results if "error" in r]
    refused = sum(r.get("refused", 0) for r in results)
    ok = [r for r in results if "error" not in r]
    first = [r["first"] for r in ok]
    added = [a for r in ok for a in r["added"]]
    durations = [r["duration"] for r in ok]
    events = sum(r["events"] for r in ok)
    last_end = max((r["end"] for r in ok), default=t0)
    span = max(1e-9, last_end - start_at)
    rss, hwm = rss_kib(server)
    machine = 100 * (busy1[0] - busy0[0]) / max(1.0, busy1[1] - busy0[1])
    return {
        "n": n, "ok": len(ok), "errors": len(errors), "error_samples": errors[:3], "refused_503": refused,
        "turns_per_s": round(len(ok) / span, 1), "events_per_s": round(events / span),
        "events_per_turn": round(events / max(1, len(ok)), 1), "stamped_events": len(added),
        "first_event_ms_p50": round(pct(first, 50) * 1000, 1), "first_event_ms_p99": round(pct(first, 99) * 1000, 1),
        "added_ms_p50": round(pct(added, 50) * 1000, 2), "added_ms_p99": round(pct(added, 99) * 1000, 2),
        "added_ms_max": round(max(added, default=float("nan")) * 1000, 1),
        "turn_s_p50": round(pct(durations, 50), 3), "turn_s_p99": round(pct(durations, 99), 3),
        "server_cpu_pct": round(100 * cpu["server"] / wall, 1), "mock_cpu_pct": round(100 * cpu["mock"] / wall, 1),
        "client_cpu_pct": round(100 * client_cpu / wall, 1), "machine_busy_pct": round(machine, 1),
        "server_cpu_ms_per_turn": round(cpu["server"] * 1000 / max(1, len(ok)), 2),
        "server_cpu_us_per_event": round(cpu["server"] * 1e6 / max(1, events), 1),
        "rss_mib_peak_sampled": round(peak_rss / 1024, 1), "rss_mib_hwm": round(hwm / 1024, 1),
        "rss_mib_after": round(rss / 1024, 1), "wall_s": round(wall, 2),
    }


COLUMNS = [
    ("N", "n"), ("errors", "errors"), ("503s", "refused_503"), ("turns/s", "turns_per_s"), ("events/s", "events_per_s"),
    ("first event p50 / p99 ms", ("first_event_ms_p50", "first_event_ms_p99")),
    ("added per event p50 / p99 ms", ("added_ms_p50", "added_ms_p99")),
    ("turn s p50 / p99", ("turn_s_p50", "turn_s_p99")),
    ("server CPU ms/turn", "server_cpu_ms_per_turn"), ("server µs/event", "server_cpu_us_per_event"),
    ("CPU % server / mock / clients / machine", ("server_cpu_pct", "mock_cpu_pct", "client_cpu_pct",
                                                 "machine_busy_pct")),
    ("RSS peak MiB", "rss_mib_hwm"),
]


def table(rows: list[dict[str, Any]]) -> str:
    def cell(r: dict[str, Any], key: str | tuple[str, ...]) -> str:
        return " / ".join(str(r[k]) for k in key) if isinstance(key, tuple) else str(r[key])

    lines = ["| " + " | ".join(h for h, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r, k) for _, k in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--delay-ms", type=float, default=25.0, help="between the mock's frames (default 25)")
    ap.add_argument("--text", type=int, nargs=2, default=[20, 40], metavar=("FIRST", "ANSWER"),
                    help="text fragments of the first and the last step (default 20 40)")
    ap.add_argument("--ramp-s", type=float, default=1.0, help="the turns start spread over this many seconds")
    ap.add_argument("--workers", type=int, default=2, help="client processes (default 2)")
    ap.add_argument("--quick", action="store_true", help="N = 100 only, shorter texts (a smoke run)")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--cprofile", type=Path, default=None, metavar="FILE",
                    help="run the server under cProfile (slower), stats written to FILE at the end")
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="record the server with py-spy into DIR/server-N.txt (collapsed stacks)")
    ap.add_argument("--pg", metavar="URL", default=None,
                    help="store on the PostgreSQL server at URL (a scratch schema) instead of SQLite")
    ap.add_argument("--floor", action="store_true", help="run the relay floor beside turnstream, interleaved")
    ap.add_argument("--rounds", type=int, default=1, help="with --floor: rounds at each N (medians reported)")
    ap.add_argument("--durable", action="store_true",
                    help="with --floor: also the durable floor (relay_floor.py --store), interleaved")
    a = ap.parse_args()
    ns = [100] if a.quick else a.n
    texts = [10, 20] if a.quick else a.text

    tmp = Path(tempfile.mkdtemp(prefix="ts-server-bench-"))
    scenario_file = tmp / "bench-chain.json"
    scenario_file.write_text(json.dumps(scenario(texts[0], texts[1], a.delay_ms)))
    env = {**os.environ, "TURNSTREAM_KEY_FILE": str(tmp / "key"), "TURNSTREAM_LOG_LEVEL": "WARNING",
           "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen[bytes]] = []
    db, store = f"sqlite:///{tmp / 'bench.db'}", "SQLite"
    if a.pg:
        schema = f"bench_{os.getpid()}_{int(time.time())}"
        asyncio.run(pg_admin(a.pg, f"CREATE SCHEMA {schema}"))
        sep = "&" if "?" in a.pg else "?"
        db, store = f"{a.pg}{sep}options=-csearch_path%3D{schema}", "PostgreSQL"
    a.store = store
    try:
        port = free_port()
        mock = subprocess.Popen([sys.executable, "-m", "turnstream.cli", "mock-provider", "--port", str(port),
                                 "--scenario", str(scenario_file)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
        procs.append(mock)
        wait_line(mock, re.compile(rb"mock-provider on"), 30)
        env.update({"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "bench-not-a-key"})
        model = "anthropic:bench-chain"
        prefix = ["-m", "cProfile", "-o", str(a.cprofile.resolve())] if a.cprofile else []
        if a.floor:
            # CPU per turn, not admission: the gate is off, so that turnstream, like the floor,
            # serves all N turns at once (its waits and 503s are measured without --floor and
            # by bench/cluster_bench.py)
            env.setdefault("TURNSTREAM_ADMIT_MAX_LAG_MS", "0")
        server = subprocess.Popen([sys.executable, *prefix, "-m", "turnstream.cli", "serve", "--port", "0", "--db",
                                   db, "--model", model],
                                  stdout=subprocess.PIPE, stderr=(tmp / "server.log").open("w"), env=env, cwd=tmp)
        procs.append(server)
        m = wait_line(server, READY, 60)
        url, key = m.group(1).decode(), (tmp / "key").read_text().strip()
        pids = {"server": server.pid, "mock": mock.pid}
        progress(f"server {url} (pid {server.pid}), RSS {rss_kib(server.pid)[0] / 1024:.0f} MiB at rest; "
                 f"mock provider pid {mock.pid}, one frame per {a.delay_ms:g} ms")
        floors: list[tuple[str, tuple[str, str, dict[str, int]]]] = []
        for name, extra in (("floor", []), ("durable", ["--store", str(tmp / "durable.db")])):
            if not a.floor or (extra and not a.durable):
                continue
            relay = subprocess.Popen([sys.executable, str(REPO / "bench" / "relay_floor.py"), "--port", "0",
                                      "--key-file", str(tmp / f"{name}.key"), *extra],
                                     stdout=subprocess.PIPE, stderr=(tmp / f"{name}.log").open("w"), env=env, cwd=tmp)
            procs.append(relay)
            fm = wait_line(relay, READY, 60)
            floors.append((name, (fm.group(1).decode(), (tmp / f"{name}.key").read_text().strip(),
                                  {"server": relay.pid, "mock": mock.pid})))
            progress(f"{name} floor {floors[-1][1][0]} (pid {relay.pid})")
        alone = run_once(1, url, key, model, pids, 1, 0.0)
        if alone["errors"]:
            progress(f"a single turn failed: {alone['error_samples']}")
            return 1
        progress(f"one turn alone: {alone['events_per_turn']:g} events, {alone['turn_s_p50']} s, "
                 f"added p50 {alone['added_ms_p50']} ms")
        if floors:
            return floor_table(a, ns, [("turnstream", (url, key, pids)), *floors], model)
        rows = []
        for n in ns:
            progress(f"N = {n}: {n} concurrent three-step turns, started over {a.ramp_s:g} s, "
                     f"{a.workers} client processes …")
            if a.profile:
                a.profile.mkdir(parents=True, exist_ok=True)
            row = run_once(n, url, key, model, pids, a.workers, a.ramp_s, a.profile)
            row["turn_slowdown_p50"] = round(row["turn_s_p50"] / alone["turn_s_p50"], 2)
            rows.append(row)
            progress("  " + json.dumps(row))
        print(f"\n### Server bench: N concurrent three-step turns (mock provider, one frame per {a.delay_ms:g} ms; "
              f"{alone['events_per_turn']:g} events per turn, {alone['stamped_events']} stamped; "
              f"one turn alone takes {alone['turn_s_p50']} s; {a.store}; {os.cpu_count()} CPUs)\n")
        print(table(rows))
        print("\nadded per event: client receive time minus the mock provider's send stamp, over every stamped "
              "block_delta; first event: POST sent -> turn_start received (of the POST that was admitted); "
              "503s: turns refused at capacity and sent again after Retry-After; CPU %: of one core, over the run")
        if a.json_out:
            a.json_out.write_text(json.dumps({"delay_ms": a.delay_ms, "alone": alone, "rows": rows}, indent=2))
        failed = any(r["errors"] for r in rows)
        return 1 if failed else 0
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        if a.pg:
            asyncio.run(pg_admin(a.pg, f"DROP SCHEMA {schema} CASCADE"))


async def pg_admin(url: str, sql: str) -> None:
    """One statement on the PostgreSQL server at ``url`` (the scratch schema's creation and drop)."""
    import asyncpg

    conn = await asyncpg.connect(url, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def floor_table(a: argparse.Namespace, ns: list[int], runs: list[tuple[str, tuple[str, str, dict[str, int]]]],
                model: str) -> int:
    """turnstream and the floors, interleaved round by round at each N: CPU per turn and the ratios."""
    names = [name for name, _ in runs]
    floors = names[1:]
    head = ["N", *(f"{name} CPU ms/turn" for name in names), *(f"turnstream / {f}" for f in floors)]
    if "durable" in floors:
        head.append("durable / floor")
    head += [f"errors ({' / '.join(names)})", f"first event p99 ms ({' / '.join(names)})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out: list[dict[str, Any]] = []
    failed = False
    for n in ns:
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for r in range(a.rounds):
            for name, (url, key, pids) in runs:
                progress(f"N = {n}, round {r + 1}/{a.rounds}: {name} …")
                if a.profile:
                    a.profile.mkdir(parents=True, exist_ok=True)
                row = run_once(n, url, key, model, pids, a.workers, a.ramp_s, a.profile, label=name)
                progress(f"  {name}: {row['server_cpu_ms_per_turn']} ms/turn, {row['errors']} errors")
                rows[name].append(row)
        ms = {name: pct([r["server_cpu_ms_per_turn"] for r in rows[name]], 50) for name in names}
        errors = {name: sum(r["errors"] for r in rows[name]) for name in names}
        failed |= any(errors.values())
        ratios = {f: ms["turnstream"] / ms[f] if ms[f] else float("nan") for f in floors}
        cells = [str(n), *(f"{ms[name]:.1f}" for name in names), *(f"{ratios[f]:.2f}x" for f in floors)]
        if "durable" in floors:
            cells.append(f"{ms['durable'] / ms['floor']:.2f}x")
        cells += [" / ".join(str(errors[name]) for name in names),
                  " / ".join(str(pct([r["first_event_ms_p99"] for r in rows[name]], 50)) for name in names)]
        lines.append("| " + " | ".join(cells) + " |")
        out.append({"n": n, "turnstream_ms": ms["turnstream"], "floor_ms": ms["floor"],
                    "ratio": round(ratios["floor"], 3), "ms": ms, "errors": errors, "rounds": rows})
    print(f"\n### Server CPU per turn beside the relay floor (bench/relay_floor.py), interleaved, median of "
          f"{a.rounds} round(s); one frame per {a.delay_ms:g} ms; {a.store}; {os.cpu_count()} CPUs\n")
    print("\n".join(lines))
    if a.json_out:
        a.json_out.write_text(json.dumps({"delay_ms": a.delay_ms, "floor": out}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
