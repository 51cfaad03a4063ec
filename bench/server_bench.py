"""The server under N concurrent turns: throughput, time to first event, added latency per
event, memory.

One ``turnstream serve`` process (SQLite in a temporary directory) runs N turns at once,
each a three-step chain (text + calculator call, calculator call, answer) from its own
session, streamed over SSE to client worker processes. The model is the mock provider
(``turnstream mock-provider``, a separate process, reached by the Anthropic adapter through
``ANTHROPIC_BASE_URL``) or, with ``--provider scripted``, the same scenario in-process.

Measured:

* throughput: turns (and events) completed per second of wall time;
* time to first event: from sending the POST to receiving ``turn_start``;
* added latency per event: how much later each event reaches the client than the same
  event of the same turn is produced by the library alone (``TurnRunner`` with the same
  provider and a SQLite store, no HTTP, one turn at a time); p50 and p99 over every event of
  every turn. It includes everything the server adds: HTTP, SSE, the bus, and queueing
  behind the N-1 other turns (and the client's own reading);
* RSS of the server process: peak (``VmHWM``) and after the run.

Targets (issue 5): no errors, p99 added latency per event < 50 ms, RSS < 1 GiB at N = 1,000.

    python bench/server_bench.py [--n 100 1000] [--provider mock|scripted] [--quick]
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx2 as httpx  # noqa: E402

from turnstream.sse import SSEDecoder  # noqa: E402

SCENARIO: dict[str, Any] = {
    "name": "bench-chain", "fragment_size": 8, "delay_ms": 2,
    "steps": [
        {"blocks": [{"type": "text", "text": "Let me add the numbers first."},
                    {"type": "tool_use", "name": "calculator", "input": {"expression": "17 + 25"}}],
         "usage": {"input_tokens": 40, "output_tokens": 12}},
        {"blocks": [{"type": "tool_use", "name": "calculator", "input": {"expression": "{{last}} * 3"}}],
         "usage": {"input_tokens": 60, "output_tokens": 9}},
        {"blocks": [{"type": "text", "text": "The answer is {{last}}; that is the sum times three."}],
         "usage": {"input_tokens": 80, "output_tokens": 14}},
    ],
}
READY = re.compile(rb"on (http://[^/#\s]+)/#key=(\S+)")


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


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


# the library alone: the reference timeline of one turn ---------------------------------------

async def reference_offsets(model: str, runs: int) -> list[float]:
    """Offset (s) of each event from the start of the turn, median over ``runs`` turns."""
    from turnstream.loop import RunConfig, TurnRunner
    from turnstream.providers import resolve_model
    from turnstream.store.sqlite import SQLiteStore
    from turnstream.toolsets import calculator_tool

    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "ref.db")
        await store.open()
        provider = resolve_model(model)
        timelines: list[list[float]] = []
        try:
            for _ in range(runs):
                session = await store.create_session("bench")
                marks: list[float] = []
                runner = TurnRunner(RunConfig(provider=provider, tools=[calculator_tool]), store,
                                    on_event=lambda _ev, m=marks: m.append(time.perf_counter()))
                t0 = time.perf_counter()
                turn = await runner.run(session.id, "compute")
                assert turn.status == "complete", turn
                timelines.append([t - t0 for t in marks])
        finally:
            await provider.aclose()
            await store.aclose()
    lengths = {len(t) for t in timelines}
    assert len(lengths) == 1, f"the reference turns differ in length: {lengths}"
    return [statistics.median(t[i] for t in timelines) for i in range(len(timelines[0]))]


# client workers -----------------------------------------------------------------------------------

async def _one_turn(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    offsets: list[float] = []
    status = None
    decoder = SSEDecoder()
    try:
        async with client.stream("POST", f"/api/sessions/{sid}/turns", json={"message": "compute"}) as r:
            if r.status_code != 200:
                await r.aread()
                return {"error": f"HTTP {r.status_code}: {r.text[:200]}"}
            async for chunk in r.aiter_raw():
                now = time.perf_counter() - t0
                for ev in decoder.feed(chunk):
                    offsets.append(now)
                    if ev.event == "turn_complete":
                        status = json.loads(ev.data)["status"]
    except httpx.HTTPError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    if status != "complete":
        return {"error": f"turn ended {status!r} after {len(offsets)} events"}
    return {"offsets": offsets}


async def _worker(url: str, key: str, n: int, model: str, start_at: float) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, limits=limits,
                                 timeout=httpx.Timeout(300.0)) as client:
        sids = []
        for _ in range(n):
            r = await client.post("/api/sessions", json={"model": model, "toolset": "calculator"})
            r.raise_for_status()
            sids.append(r.json()["id"])
        delay = start_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)  # every worker starts its turns at the same moment
        return list(await asyncio.gather(*(_one_turn(client, s) for s in sids)))


def worker_main(args: tuple[str, str, int, str, float]) -> list[dict[str, Any]]:
    return asyncio.run(_worker(*args))


# one run ------------------------------------------------------------------------------------------

def run_once(n: int, url: str, key: str, model: str, server_pid: int, workers: int,
             reference: list[float]) -> dict[str, Any]:
    shares = [n // workers + (1 if i < n % workers else 0) for i in range(workers)]
    shares = [s for s in shares if s]
    start_at = time.time() + 1.0 + n / 500  # time for every worker to create its sessions
    t_start = time.perf_counter()
    cpu_before = cpu_s(server_pid)
    peak_rss = 0
    with mp.get_context("fork").Pool(len(shares)) as pool:
        pending = pool.map_async(worker_main, [(url, key, s, model, start_at) for s in shares])
        while not pending.ready():
            pending.wait(0.5)
            peak_rss = max(peak_rss, rss_kib(server_pid)[0])
            elapsed = time.perf_counter() - t_start
            if elapsed > 600:
                raise TimeoutError(f"N={n}: not done after 600 s")
        results = [r for part in pending.get() for r in part]
    wall = time.time() - start_at
    server_cpu = cpu_s(server_pid) - cpu_before
    errors = [r["error"] for r in results if "error" in r]
    ok = [r["offsets"] for r in results if "offsets" in r]
    first = [o[0] for o in ok if o]
    added: list[float] = []
    mismatched = 0
    for offs in ok:
        if len(offs) != len(reference):
            mismatched += 1
            continue
        added.extend(o - ref for o, ref in zip(offs, reference, strict=True))
    last = max((o[-1] for o in ok), default=0.0)
    rss, hwm = rss_kib(server_pid)
    events = sum(len(o) for o in ok)
    return {
        "n": n, "ok": len(ok), "errors": len(errors), "error_samples": errors[:3], "length_mismatch": mismatched,
        "turns_per_s": round(len(ok) / last, 1) if last else 0.0,
        "events_per_s": round(events / last, 1) if last else 0.0,
        "slowest_turn_s": round(last, 3),
        "first_event_ms_p50": round(pct(first, 50) * 1000, 1), "first_event_ms_p99": round(pct(first, 99) * 1000, 1),
        "added_ms_p50": round(pct(added, 50) * 1000, 2), "added_ms_p99": round(pct(added, 99) * 1000, 2),
        "events_per_turn": len(reference),
        "rss_mib_peak_sampled": round(peak_rss / 1024, 1), "rss_mib_hwm": round(hwm / 1024, 1),
        "rss_mib_after": round(rss / 1024, 1), "wall_s": round(wall, 2),
        "server_cpu_ms_per_turn": round(server_cpu * 1000 / max(1, len(ok)), 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--provider", choices=["mock", "scripted"], default="mock")
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 2), help="client processes")
    ap.add_argument("--quick", action="store_true", help="N = 20 and 100 (a smoke run)")
    ap.add_argument("--json-out", type=Path, default=None)
    a = ap.parse_args()
    ns = [20, 100] if a.quick else a.n

    tmp = Path(tempfile.mkdtemp(prefix="ts-server-bench-"))
    scenario_file = tmp / "bench-chain.json"
    scenario_file.write_text(json.dumps(SCENARIO))
    env = {**os.environ, "TURNSTREAM_KEY_FILE": str(tmp / "key"), "TURNSTREAM_LOG_LEVEL": "WARNING",
           "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if a.provider == "mock":
            port = free_port()
            mock = subprocess.Popen([sys.executable, "-m", "turnstream.cli", "mock-provider", "--port", str(port),
                                     "--scenario", str(scenario_file)], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env)
            procs.append(mock)
            wait_line(mock, re.compile(rb"mock-provider on"), 30)
            env.update({"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "bench-not-a-key"})
            os.environ.update({"ANTHROPIC_BASE_URL": env["ANTHROPIC_BASE_URL"],
                               "ANTHROPIC_API_KEY": env["ANTHROPIC_API_KEY"]})
            model = "anthropic:bench-chain"
        else:
            model = f"scripted:{scenario_file}"
        progress(f"reference timeline: the library alone, {model}")
        reference = asyncio.run(reference_offsets(model, 5))
        progress(f"  {len(reference)} events per turn, last at {reference[-1] * 1000:.0f} ms")

        server = subprocess.Popen([sys.executable, "-m", "turnstream.cli", "serve", "--port", "0", "--db",
                                   f"sqlite:///{tmp / 'bench.db'}", "--model", model],
                                  stdout=subprocess.PIPE, stderr=(tmp / "server.log").open("w"), env=env, cwd=tmp)
        procs.append(server)
        m = wait_line(server, READY, 60)
        url, key = m.group(1).decode(), m.group(2).decode()
        progress(f"server {url} (pid {server.pid}), RSS {rss_kib(server.pid)[0] / 1024:.0f} MiB at rest")
        rows = []
        for n in ns:
            progress(f"N = {n}: {n} concurrent three-step turns, {a.workers} client processes …")
            row = run_once(n, url, key, model, server.pid, a.workers, reference)
            rows.append(row)
            progress("  " + json.dumps(row))
        print(f"\nserver bench ({a.provider} provider, SQLite, {len(reference)} events per turn)")
        head = ("N", "errors", "turns/s", "events/s", "first ev p50 ms", "first ev p99 ms", "added p50 ms",
                "added p99 ms", "RSS peak MiB")
        print(" | ".join(head))
        for r in rows:
            print(" | ".join(str(x) for x in (r["n"], r["errors"], r["turns_per_s"], r["events_per_s"],
                                              r["first_event_ms_p50"], r["first_event_ms_p99"], r["added_ms_p50"],
                                              r["added_ms_p99"], r["rss_mib_hwm"])))
        if a.json_out:
            a.json_out.write_text(json.dumps({"provider": a.provider, "rows": rows}, indent=2))
        failed = any(r["errors"] or r["length_mismatch"] for r in rows)
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


if __name__ == "__main__":
    sys.exit(main())
