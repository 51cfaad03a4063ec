"""Several nodes behind HAProxy: what a cluster carries, and what a node pays for the others.

The cluster is the one ``make cluster`` starts (``tests/support/cluster.py``: a PostgreSQL of
its own, K ``turnstream serve`` each in a network namespace of its own, HAProxy running
``deploy/haproxy.cfg``), its model the mock provider (``turnstream mock-provider``, paced at
one frame every ``--delay-ms``), relayed onto the cluster's bridge. The turns are
``bench/server_bench.py``'s three-step chain, driven by its client processes; for each node
count K and each N:

* **balanced**: N concurrent turns through HAProxy (each in its own session, so the hash on
  the session id spreads them): turns/s, time to first event p50/p99 (POST sent ->
  ``turn_start`` of the POST that was admitted), 503s (refusals the client saw, after HAProxy's
  retries; a client sends a refused turn again after its ``Retry-After``) and other errors,
  server CPU ms per turn per node (each node's CPU over the run, divided by the turns it ran
  — its admission counter), NOTIFYs per turn (every node's ``/healthz`` bus counter
  ``notifications_sent``, summed, over the turns);
* **one node serves** (K >= 2): the same N turns sent to node 1 alone (its own HAProxy port),
  the others serving and following nothing: their CPU against node 1's is what a node pays
  for turns it does not serve (the issue's target: at most 2 %).

CPU is read from ``/proc/<pid>/stat`` of each node process (user + system). Needs root (the
namespaces) and HAProxy (``scripts/ensure-package.sh``).

    python bench/cluster_bench.py [--nodes 1 2 3] [--n 300 1000] [--delay-ms 25] [--quick]

``--quick``: N = 20 on 1 and 2 nodes, short texts (a smoke run). Progress goes to stderr,
the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.server_bench import cpu_s, free_port, pct, progress, scenario, wait_line, worker_main  # noqa: E402
from tests.support.cluster import LocalCluster, running  # noqa: E402


def healthz(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/healthz", timeout=10) as r:  # loopback: a node's own HAProxy port
        doc: dict[str, Any] = json.loads(r.read())
        return doc


def counters(cluster: LocalCluster) -> dict[int, tuple[int, int]]:
    """Per node: (turns admitted, notifications sent) so far."""
    out = {}
    for i in range(1, cluster.layout.nodes + 1):
        doc = healthz(cluster.layout.node_url(i))
        out[i] = (int(doc["admission"]["admitted"]), int((doc.get("bus") or {}).get("notifications_sent", 0)))
    return out


def run(cluster: LocalCluster, url: str, n: int, model: str, workers: int, ramp_s: float) -> dict[str, Any]:
    """N concurrent turns against ``url``; per-node CPU and counters around them."""
    workers = max(1, min(workers, n))
    start_at = time.time() + 1.5 + n / 300  # time for every worker to create its sessions
    starts = [start_at + ramp_s * i / n for i in range(n)]
    parts = [starts[i::workers] for i in range(workers)]
    nodes = range(1, cluster.layout.nodes + 1)
    with mp.get_context("fork").Pool(workers) as pool:
        pending = pool.map_async(worker_main, [(url, cluster.key, len(p), model, p) for p in parts])
        count0 = counters(cluster)  # before the first turn starts (creating sessions admits none)
        while time.time() < start_at:
            pending.wait(0.05)
        cpu0 = {i: cpu_s(cluster.node_pid(i)) for i in nodes}
        t0 = time.time()
        pending.wait(900)
        if not pending.ready():
            raise TimeoutError(f"N={n}: not done after 900 s")
        wall = time.time() - t0
        cpu = {i: cpu_s(cluster.node_pid(i)) - cpu0[i] for i in nodes}
        count1 = counters(cluster)
        results = [r for part in pending.get() for r in part["results"]]
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    refused = [e for e in errors if e.startswith("HTTP 503")]  # past the client's own retries
    retried = sum(r.get("refused", 0) for r in results)  # 503s the client waited out and sent again
    first = [r["first"] for r in ok]
    served = {i: count1[i][0] - count0[i][0] for i in nodes}
    notifies = sum(count1[i][1] - count0[i][1] for i in nodes)
    span = max(1e-9, max((r["end"] for r in ok), default=t0) - start_at)
    return {
        "n": n, "ok": len(ok), "refused_503": len(refused) + retried, "errors": len(errors) - len(refused),
        "error_samples": [e for e in errors if not e.startswith("HTTP 503")][:3],
        "turns_per_s": round(len(ok) / span, 1),
        "first_event_ms_p50": round(pct(first, 50) * 1000, 1), "first_event_ms_p99": round(pct(first, 99) * 1000, 1),
        "served": served, "cpu_s": {i: round(c, 2) for i, c in cpu.items()},
        "cpu_ms_per_turn": {i: round(cpu[i] * 1000 / served[i], 2) if served[i] else None for i in nodes},
        "notifies_per_turn": round(notifies / max(1, len(ok)), 2), "wall_s": round(wall, 1),
    }


def bench_nodes(k: int, ns: list[int], provider: str, model: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    env = {"TURNSTREAM_MODEL": model, "TURNSTREAM_LOG_LEVEL": "WARNING"}
    with running(nodes=k, env=env, provider=provider) as cluster:
        progress(f"{k} node(s) up: HAProxy {cluster.layout.lb_url}, nodes at {cluster.layout.prefix}.11-1{k}")
        for n in ns:
            progress(f"  {k} node(s), N = {n}: through HAProxy …")
            row = {"nodes": k, "mode": "balanced", **run(cluster, cluster.layout.lb_url, n, model, a.workers, a.ramp_s)}
            progress("    " + json.dumps(row))
            rows.append(row)
            if k >= 2:
                progress(f"  {k} nodes, N = {n}: all on node 1, the others idle …")
                one = run(cluster, cluster.layout.node_url(1), n, model, a.workers, a.ramp_s)
                others = [one["cpu_s"][i] for i in range(2, k + 1)]
                one["idle_node_cpu_pct_of_serving"] = round(100 * max(others) / max(1e-9, one["cpu_s"][1]), 2)
                row = {"nodes": k, "mode": "node 1 serves", **one}
                progress("    " + json.dumps(row))
                rows.append(row)
    return rows


COLUMNS = ["nodes", "mode", "n", "turns/s", "first event p50 / p99 ms", "503s", "errors",
           "CPU ms/turn per node", "idle node CPU % of serving", "NOTIFYs/turn"]


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        per_node = " / ".join("—" if v is None else str(v) for v in r["cpu_ms_per_turn"].values())
        cells = [r["nodes"], r["mode"], r["n"], r["turns_per_s"],
                 f"{r['first_event_ms_p50']} / {r['first_event_ms_p99']}", r["refused_503"], r["errors"],
                 per_node, r.get("idle_node_cpu_pct_of_serving", "—"), r["notifies_per_turn"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3], choices=(1, 2, 3))
    ap.add_argument("--n", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--delay-ms", type=float, default=25.0, help="between the mock's frames (default 25)")
    ap.add_argument("--text", type=int, nargs=2, default=[20, 40], metavar=("FIRST", "ANSWER"),
                    help="text fragments of the first and the last step (default 20 40)")
    ap.add_argument("--ramp-s", type=float, default=1.0, help="the turns start spread over this many seconds")
    ap.add_argument("--workers", type=int, default=2, help="client processes (default 2)")
    ap.add_argument("--quick", action="store_true", help="N = 20 on 1 and 2 nodes, short texts (a smoke run)")
    ap.add_argument("--json-out", type=Path, default=None)
    a = ap.parse_args()
    ns, nodes = ([20], [1, 2]) if a.quick else (a.n, a.nodes)
    texts = [5, 10] if a.quick else a.text
    if os.geteuid() != 0:
        progress("the cluster bench makes network namespaces: run it as root")
        return 1
    subprocess.check_call(["bash", str(REPO / "scripts" / "ensure-package.sh"), "haproxy", "haproxy",
                           "the cluster's load balancer"])

    tmp = Path(tempfile.mkdtemp(prefix="ts-cluster-bench-"))
    scenario_file = tmp / "bench-chain.json"
    scenario_file.write_text(json.dumps(scenario(texts[0], texts[1], a.delay_ms)))
    port = free_port()
    mock = subprocess.Popen([sys.executable, "-m", "turnstream.cli", "mock-provider", "--port", str(port),
                             "--scenario", str(scenario_file)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    rows: list[dict[str, Any]] = []
    try:
        wait_line(mock, re.compile(rb"mock-provider on"), 30)
        for k in nodes:
            rows += bench_nodes(k, ns, f"http://127.0.0.1:{port}", "anthropic:bench-chain", a)
    finally:
        mock.terminate()
        mock.wait(20)
        if mock.stdout is not None:
            mock.stdout.close()
    print(f"\n### Cluster bench: K nodes behind HAProxy, N concurrent three-step turns (mock provider, one frame "
          f"per {a.delay_ms:g} ms; PostgreSQL; {os.cpu_count()} CPUs, every process on this one machine)\n")
    print(table(rows))
    print("\nCPU ms/turn per node: each node's CPU over the run / the turns it admitted; idle node CPU: the "
          "busiest other node's CPU as a share of node 1's when node 1 serves every turn; NOTIFYs/turn: the "
          "nodes' notifications_sent (/healthz) over the turns")
    if a.json_out:
        a.json_out.write_text(json.dumps({"delay_ms": a.delay_ms, "rows": rows}, indent=2))
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
