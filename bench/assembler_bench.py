"""Assembler throughput: tool inputs of 2 KB, 50 KB and 500 KB arriving in 8-byte fragments.

Two paths are timed per size: the assembler alone (neutral deltas in, blocks out, with the
live best-effort input parse on, as a UI stream uses it) and the whole Anthropic wire path
(SSE bytes → decoder → adapter → assembler). The per-byte cost at 500 KB must stay within
1.5× of the 2 KB cost: the work is linear in the input.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from turnstream.assemble import Assembler
from turnstream.blocks import Usage
from turnstream.providers.anthropic import StreamParser
from turnstream.providers.base import BlockClosed, BlockOpened, Delta, StepEnded
from turnstream.providers.http import EventStream

SIZES = (2_000, 50_000, 500_000)
FRAG = 8


def tool_input(size: int) -> str:
    line = "df = df[df['units'] > 40]  # \"quoted\" \\ and é\n"
    code = (line * (size // len(line) + 1))[: size - 40]
    return json.dumps({"cell_id": "c1", "code": code})


def assembler_only(raw: str, snapshots: bool) -> Callable[[], None]:
    frags = [raw[i:i + FRAG] for i in range(0, len(raw), FRAG)]

    def run() -> None:
        asm = Assembler(step=1, first_seq=0, origin="bench:x", provider="bench", snapshots=snapshots)
        asm.feed(BlockOpened(0, "tool_use", tool_use_id="t", name="update_cell"))
        for f in frags:
            asm.feed(Delta(0, "input_json", f))
        asm.feed(BlockClosed(0))
        asm.feed(StepEnded("tool_use", Usage()))
        assert asm.finished[0].input["cell_id"] == "c1"  # type: ignore[union-attr]

    return run


def wire_path(raw: str) -> Callable[[], None]:
    frames = [b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
              b'{"type":"tool_use","id":"t","name":"update_cell","input":{}}}\n\n']
    for i in range(0, len(raw), FRAG):
        payload = {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "input_json_delta", "partial_json": raw[i:i + FRAG]}}
        frames.append(b"event: content_block_delta\ndata: " + json.dumps(payload).encode() + b"\n\n")
    frames.append(b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n')
    frames.append(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    body = b"".join(frames)
    chunks = [body[i:i + 16384] for i in range(0, len(body), 16384)]

    def run() -> None:
        stream = EventStream(StreamParser())
        asm = Assembler(step=1, first_seq=0, origin="bench:x", provider="bench", snapshots=False)
        for c in chunks:
            for e in stream.feed(c):
                asm.feed(e)
        assert asm.finished

    return run


def best_of(fn: Callable[[], None], budget_s: float = 1.5) -> float:
    best = float("inf")
    deadline = time.perf_counter() + budget_s
    runs = 0
    while runs < 3 or (time.perf_counter() < deadline and runs < 50):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        runs += 1
    return best


def main() -> None:
    print("## (a) Assembler throughput: tool input in 8-byte fragments\n")
    print("| path | 2 KB ns/byte | 50 KB ns/byte | 500 KB ns/byte | MB/s at 500 KB | 500 KB ÷ 2 KB |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, make in (("assembler, live partial parse", lambda r: assembler_only(r, True)),
                        ("assembler, quiet (Agent.run)", lambda r: assembler_only(r, False)),
                        ("SSE bytes → adapter → assembler", wire_path)):
        per_byte = []
        for size in SIZES:
            print(f"  timing {label} at {size} bytes…", file=sys.stderr, flush=True)
            raw = tool_input(size)
            per_byte.append(best_of(make(raw)) / len(raw) * 1e9)
        ratio = per_byte[-1] / per_byte[0]
        mbps = 1e3 / per_byte[-1]
        print(f"| {label} | {per_byte[0]:.1f} | {per_byte[1]:.1f} | {per_byte[2]:.1f} | {mbps:.1f} | {ratio:.2f}× |")
    print()


if __name__ == "__main__":
    main()
