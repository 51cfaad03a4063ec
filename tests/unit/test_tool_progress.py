"""A running tool's progress (issue 27, item 8): ``ToolContext.progress`` from an async tool
and from a sync tool's worker thread becomes ``tool_progress`` events, in order, before the
call's result, never stored; the encoders carry it (AI SDK data part, AG-UI ``CUSTOM``) and
the terminal chat shows it on its spinner line."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from turnstream import Agent, tool
from turnstream.blocks import ToolResultBlock, ToolUseBlock
from turnstream.chat.render import Renderer, progress_line
from turnstream.events import BlockStop, ToolProgress
from turnstream.server.agui import PROGRESS_EVENT, AGUIEncoder
from turnstream.server.aisdk import PROGRESS_PART, UIMessageStreamEncoder
from turnstream.store.memory import MemoryStore
from turnstream.tools.tool import ToolContext


@tool
async def crunch(ctx: ToolContext) -> str:
    """Crunches numbers, saying how far it got."""
    for i in range(1, 4):
        ctx.progress(i, 3, f"chunk {i}")
    return "crunched"


@tool
def scan(ctx: ToolContext) -> str:
    """Scans, in a worker thread, with no total known."""
    ctx.progress(10)
    ctx.progress(20, message="still going")
    return "scanned"


async def test_progress_from_async_and_sync_tools_is_streamed_before_the_result_and_not_stored(
        tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"name": "s", "steps": [
        {"blocks": [{"type": "tool_use", "name": "crunch", "input": {}}]},
        {"blocks": [{"type": "tool_use", "name": "scan", "input": {}}]},
        {"blocks": [{"type": "text", "text": "done"}]}]}))
    store = MemoryStore()
    agent = Agent(f"scripted:{script}", tools=[crunch, scan], store=store)
    events = [ev async for ev in agent.stream("go")]
    ids = {ev.block.name: ev.block.tool_use_id for ev in events
           if isinstance(ev, BlockStop) and isinstance(ev.block, ToolUseBlock)}
    progress = [ev for ev in events if isinstance(ev, ToolProgress)]
    assert [(p.tool_use_id, p.progress, p.total, p.message) for p in progress] == [
        (ids["crunch"], 1.0, 3.0, "chunk 1"), (ids["crunch"], 2.0, 3.0, "chunk 2"),
        (ids["crunch"], 3.0, 3.0, "chunk 3"), (ids["scan"], 10.0, None, None),
        (ids["scan"], 20.0, None, "still going")]
    for call in ("crunch", "scan"):
        result = next(i for i, ev in enumerate(events) if isinstance(ev, BlockStop)
                      and isinstance(ev.block, ToolResultBlock) and ev.block.tool_use_id == ids[call])
        assert all(events.index(p) < result for p in progress if p.tool_use_id == ids[call])
    numbers = [ev.n for ev in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    stored = await store.events_after(events[0].turn_id, 0)
    assert not [e for e in stored if e.name == "tool_progress"] and stored


def test_the_ai_sdk_and_ag_ui_streams_carry_it() -> None:
    ev = ToolProgress(tool_use_id="call_1", progress=2, total=5, message="reading", turn_id="t", n=7)
    want = {"toolCallId": "call_1", "progress": 2, "total": 5, "message": "reading"}
    for version in (5, 6, 7):
        chunks = UIMessageStreamEncoder(version=version)._event(ev)  # type: ignore[arg-type]
        assert chunks == [{"type": PROGRESS_PART, "id": "call_1", "data": want}]
    agui = AGUIEncoder(thread_id="th", run_id="r", model="m")._event(ev)
    assert agui == [{"type": "CUSTOM", "name": PROGRESS_EVENT, "value": want}]


def test_the_terminal_spinner_line_says_how_far_the_call_got() -> None:
    assert progress_line("crunch", ToolProgress(progress=2, total=5, message="reading")) == (
        "running tools… ⚙ crunch 2/5 (40%) · reading")
    assert progress_line("scan", ToolProgress(progress=20)) == "running tools… ⚙ scan 20"
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    renderer = Renderer(console)
    renderer.waiting("running tools…")
    renderer.handle(ToolProgress(tool_use_id="c", progress=1, total=4))
    assert renderer._status is not None and str(renderer._status.status) == "running tools… ⚙ tool 1/4 (25%)"
    renderer.quiet()
