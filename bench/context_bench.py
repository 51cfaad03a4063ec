"""What fitting a request into the context window costs a step (docs/context.md).

A step already builds its transcript from the stored blocks (``transcript.build``); fitting
adds an estimate of the request's size and, past the line, clearing old tool results. This
times both on the same conversations: ``--turns`` turns of a notebook session, each one cell
run whose output has ``--chars`` characters, against a model whose window the conversation
fits (estimate only) and one it overflows (estimate and clearing, every step). The line to
read is the fit's cost beside the build's, and beside a step's whole CPU (about 10 ms in the
server bench, docs/performance.md).

    python bench/context_bench.py [--turns 40] [--chars 6600] [--reps 200]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from turnstream.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from turnstream.context.fit import ContextFit
from turnstream.limits import Limits
from turnstream.providers.base import ModelRequest, ToolSpec
from turnstream.transcript import build


def conversation(turns: int, chars: int) -> list[tuple[str, list[Block]]]:
    out: list[tuple[str, list[Block]]] = []
    for t in range(turns):
        blocks: list[Block] = [
            TextBlock(seq=0, step=1, text="Running the cell."),
            ToolUseBlock(seq=1, step=1, tool_use_id=f"c{t}", name="run_cell", input={"cell": t},
                         raw_input=f'{{"cell": {t}}}'),
            ToolResultBlock(seq=2, step=1, tool_use_id=f"c{t}", content=f"out {t} " + "x" * chars),
            TextBlock(seq=3, step=2, text="The cell printed its data; the mean is 4.2."),
        ]
        out.append((f"run cell {t}", blocks))
    return out


def per_call(fn: Callable[[], object], reps: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--chars", type=int, default=6_600)
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    history = conversation(a.turns, a.chars)
    schema = {"type": "object", "properties": {"cell": {"type": "integer"}}}
    tools = [ToolSpec("run_cell", "Run a notebook cell.", schema)]
    build_us = per_call(lambda: build(history, "anthropic:claude-sonnet-4-5"), a.reps)
    messages = build(history, "anthropic:claude-sonnet-4-5")[0]
    print(f"{a.turns} turns, {a.chars:,}-character cell outputs; microseconds per step:")
    print(f"  {'transcript.build (what a step does already)':<52} {build_us:9.1f}")
    for label, origin in (("fit, window not reached (estimate only)", "anthropic:claude-sonnet-4-5"),
                          ("fit, window passed (estimate and clearing)", "anthropic:mock-32k")):
        fit = ContextFit(origin, Limits(), "bench")

        def once(fit: ContextFit = fit) -> object:
            return fit.fit(ModelRequest(model="m", messages=list(messages), tools=tools, max_tokens=8192), 2)

        us = per_call(once, a.reps)
        print(f"  {label:<52} {us:9.1f}   ({us / build_us:.2f}x the build; {us / 10_000:.2%} of a 10 ms step)")


if __name__ == "__main__":
    main()
