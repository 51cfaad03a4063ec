"""Client CPU per conversation for each adapter on the same script, over real HTTP.

``turnstream mock-provider`` (a subprocess) plays the shared bench's conversation in each
wire format: 3 tool rounds, each a short text and one ``update_cell`` call whose 2,000-byte
code arrives in 8-byte fragments, then a 200-word answer. Each adapter runs N conversations
with ``Agent.run()`` in its own subprocess; CPU is ``getrusage`` around the measured block.
The shared harness's mock has no Responses API, so this is where ``openai-responses:`` is
measured beside ``anthropic:`` and ``openai:``.

    python bench/provider_cpu.py [--n 50]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = {"anthropic": "anthropic:bench", "openai": "openai:bench", "openai-responses": "openai-responses:bench"}


def scenario() -> dict[str, object]:
    steps: list[dict[str, object]] = []
    for k in range(3):
        code = f"# cell c{k}:" + ("x = 1\n" * 400)[: 2000 - len(f"# cell c{k}:")]
        steps.append({"fragment_size": 8, "blocks": [
            {"type": "text", "text": f"Updating cell {k}."},
            {"type": "tool_use", "name": "update_cell", "input": {"cell_id": f"c{k}", "code": code}}]})
    steps.append({"fragment_size": 6, "blocks": [{"type": "text", "text": " ".join(["word"] * 200)}]})
    return {"name": "bench", "steps": steps}


def child(provider: str, base: str, n: int) -> None:
    os.environ.update({"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "k",
                       "OPENAI_BASE_URL": base + "/v1", "OPENAI_API_KEY": "k"})
    import asyncio

    from turnstream import Agent, tool

    @tool
    async def update_cell(cell_id: str, code: str) -> str:
        """Replace a cell's code."""
        assert len(code) == 2000
        return "ok"

    async def main() -> None:
        agent = Agent(MODELS[provider], tools=[update_cell])
        for _ in range(3):
            await agent.run("update the notebook")
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(n):
            turn = await agent.run("update the notebook")
            assert turn.status == "complete" and len(turn.text.split()) == 200, turn
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1000
        print(json.dumps({"provider": provider, "cpu_ms": cpu}))
        await agent.aclose()

    asyncio.run(main())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], a.n)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(scenario(), f)
    mock = subprocess.Popen([sys.executable, "-m", "turnstream.cli", "mock-provider", "--port", str(port),
                             "--scenario", f.name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert mock.stdout is not None
        mock.stdout.readline()  # the mock prints its address once it is about to listen
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        rows = []
        for provider in MODELS:
            print(f"  {provider}: {a.n} conversations…", file=sys.stderr, flush=True)
            out = subprocess.run([sys.executable, __file__, "--n", str(a.n), "--child", provider, base],
                                 capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print("## Client CPU per conversation by adapter (turnstream mock-provider, same script)\n")
        print("| adapter | CPU ms/conv |\n|---|---:|")
        for r in rows:
            print(f"| `{MODELS[r['provider']].split(':')[0]}:` | {r['cpu_ms']:.1f} |")
        print()
    finally:
        mock.terminate()
        mock.wait(timeout=10)
        os.unlink(f.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
