"""``make bench``: every turnstream benchmark, one after another, progress on stderr.

1. assembler throughput (2 KB / 50 KB / 500 KB tool inputs in 8-byte fragments), and what
   fitting a request into the context window costs a step (``bench/context_bench.py``);
2. store: blocks appended per second per backend (``bench/store_bench.py``);
3. client CPU per conversation of each adapter on one script (``bench/provider_cpu.py``);
   then per 3-step conversation beside the floor and the peer frameworks, through
   the shared harness (``../shared/bench``), in a separate virtualenv (``.venv-bench``)
   holding the peers' pinned versions and this checkout;
4. the server under N concurrent turns (``bench/server_bench.py``), when present, then its CPU per
   turn beside the relay floor (``--floor``: ``bench/relay_floor.py``, interleaved);
5. 1, 2 and 3 nodes behind HAProxy (``bench/cluster_bench.py``; root, for its network namespaces).

``--quick`` runs each part small. Results go to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_VENV = REPO / ".venv-bench"


def shared_bench() -> Path:
    env = os.environ.get("TURNSTREAM_SHARED")
    return (Path(env) if env else REPO.parent / "shared") / "bench"


def step(title: str) -> None:
    print(f"\n==> {title}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw: object) -> int:
    print("    $ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.call(cmd, **kw)  # type: ignore[arg-type]


def ensure_bench_venv(shared: Path) -> Path:
    py = BENCH_VENV / "bin" / "python"
    stamp = BENCH_VENV / ".ready"
    if not stamp.exists():
        step("preparing .venv-bench (peer frameworks at the shared bench's pinned versions; once)")
        subprocess.check_call([sys.executable, "-m", "venv", str(BENCH_VENV)])
        subprocess.check_call([str(py), "-m", "pip", "install", "-q", "-r", str(shared / "requirements.txt")])
        stamp.touch()
    subprocess.check_call([str(py), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)])
    subprocess.check_call([str(py), "-m", "pip", "install", "-q", "orjson", "rich", "anyio", "httpx2", "aiohttp",
                           "pydantic"])
    return py


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small runs (a smoke test)")
    ap.add_argument("--skip-peers", action="store_true", help="only turnstream and the floors in the CPU table")
    a = ap.parse_args()
    results = REPO / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    py = sys.executable
    failed = 0

    step("assembler throughput")
    failed |= run([py, str(REPO / "bench" / "assembler_bench.py")])

    step("context window: what fitting a request costs a step, beside building its transcript")
    failed |= run([py, str(REPO / "bench" / "context_bench.py")] + (["--reps", "20"] if a.quick else []))

    if (REPO / "bench" / "store_bench.py").exists():
        step("store: blocks appended per second")
        failed |= run([py, str(REPO / "bench" / "store_bench.py")] + (["--seconds", "0.3"] if a.quick else []))

    if (REPO / "bench" / "persistence_bench.py").exists():
        step("store: CPU a 3-step turn spends on persistence, beside the in-memory store")
        quick = ["--rounds", "1", "--turns", "5", "--warmup", "2"] if a.quick else []
        failed |= run([py, str(REPO / "bench" / "persistence_bench.py"), *quick])

    step("prompt cache: input tokens read and written per step of a 3-step turn (turnstream mock-provider)")
    failed |= run([py, str(REPO / "bench" / "cache_bench.py")])

    step("client CPU by adapter: anthropic, openai, openai-responses (turnstream mock-provider)")
    failed |= run([py, str(REPO / "bench" / "provider_cpu.py"), "--n", "10" if a.quick else "50"])

    shared = shared_bench()
    if (shared / "run.py").exists():
        bpy = ensure_bench_venv(shared)
        drivers = "turnstream,turnstream_openai,floor_httpx,floor_httpx_openai"
        if not a.skip_peers:
            drivers += ",baseline_raw_sdk,anthropic_tool_runner,pydantic_ai,openai_agents,langgraph"
        step(f"client CPU per conversation ({drivers})")
        cmd = [str(bpy), str(REPO / "bench" / "client_cpu.py"), "--drivers", drivers,
               "--json-out", str(results / f"client-cpu-{stamp}.json")]
        cmd += ["--quick"] if a.quick else ["--configs", "seq,conc,large", "--reps", "3"]
        failed |= run(cmd, env={**os.environ, "TURNSTREAM_SHARED": str(shared.parent)})
    else:
        print(f"(skipped client CPU: {shared} not found; set TURNSTREAM_SHARED)", file=sys.stderr)

    if (REPO / "bench" / "server_bench.py").exists():
        step("server: concurrent turns")
        failed |= run([py, str(REPO / "bench" / "server_bench.py")] + (["--quick"] if a.quick else []))
        step("server: CPU per turn beside the relay floor and the durable floor (bench/relay_floor.py), interleaved")
        failed |= run([py, str(REPO / "bench" / "server_bench.py"), "--floor", "--durable"]
                      + (["--quick"] if a.quick else ["--rounds", "3"]))

    if (REPO / "bench" / "cluster_bench.py").exists():
        step("cluster: 1, 2 and 3 nodes behind HAProxy, N = 300 and 1,000 (bench/cluster_bench.py)")
        failed |= run([py, str(REPO / "bench" / "cluster_bench.py"), "--json-out",
                       str(results / f"cluster-{stamp}.json")] + (["--quick"] if a.quick else []))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
