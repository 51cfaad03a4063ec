"""ToolExecutor on its own: what it decides for each call, and how every run ends as a result."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from turnstream import ToolContext, tool
from turnstream.blocks import ToolUseBlock
from turnstream.tools.executor import DENIED, Outcome, ToolExecutor
from turnstream.tools.tool import Tool


def call(name: str, tool_use_id: str = "c1", **input: object) -> ToolUseBlock:
    return ToolUseBlock(tool_use_id=tool_use_id, name=name, input=dict(input))


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(requires_approval=True)
def wipe() -> str:
    """Wipe everything."""
    return "wiped"


async def run(executor: ToolExecutor, *calls: ToolUseBlock) -> list[Outcome]:
    outcomes = [await executor.decide(c) for c in calls]
    await executor.run(outcomes, session_id="s1", turn_id="t1")
    return outcomes


async def test_decisions() -> None:
    tools = {t.name: t for t in (add, wipe, Tool.client("locate"))}
    ex = ToolExecutor(tools)
    unknown = await ex.decide(call("nope"))
    assert (unknown.kind, unknown.is_error) == ("result", True)
    assert unknown.content == "Unknown tool 'nope'. Available tools: add, locate, wipe."
    broken = await ex.decide(ToolUseBlock(tool_use_id="c", name="add", input_error="invalid JSON"))
    assert broken.is_error and "invalid JSON" in broken.content and "not run" in broken.content
    assert (await ex.decide(call("locate"))).kind == "client"
    assert (await ex.decide(call("wipe"))).kind == "approval"  # nobody to ask here: the client is asked
    assert (await ex.decide(call("add", a=1, b=2))).kind == "result"


async def test_an_approver_answers_inline() -> None:
    asked: list[str] = []

    async def deny(c: ToolUseBlock, t: Tool) -> bool:
        asked.append(c.tool_use_id)
        return False

    out = await ToolExecutor({"wipe": wipe}, approver=deny).decide(call("wipe", "w1"))
    assert asked == ["w1"] and (out.kind, out.content, out.is_error) == ("result", DENIED, True)


async def test_every_failure_is_a_result_the_model_can_read() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Sleeps too long."""
        await asyncio.sleep(10)
        return "late"

    @tool
    def boom() -> str:
        """Fails."""
        raise KeyError("missing thing")

    @tool
    async def own_timeout() -> str:
        """Raises its own TimeoutError (not the deadline's)."""
        raise TimeoutError("upstream took too long")

    @tool
    def big() -> str:
        """A large result."""
        return "x" * 60

    ex = ToolExecutor({t.name: t for t in (add, slow, boom, own_timeout, big)}, max_result_chars=40)
    bad, late, failed, own, large = await run(
        ex, call("add", "1", a="two", b=2), call("slow", "2"), call("boom", "3"), call("own_timeout", "4"),
        call("big", "5"))
    assert bad.is_error and bad.content.startswith("Invalid arguments for tool 'add':\n- a:")
    assert (late.is_error, late.content) == (True, "Tool execution timed out after 0.05s")
    assert (failed.is_error, failed.content) == (True, "KeyError: 'missing thing'")
    assert (own.is_error, own.content) == (True, "TimeoutError: upstream took too long")
    assert large.content.startswith("x" * 40 + "\n\n[truncated: the result has 60 characters")


async def test_calls_of_a_step_run_together_and_sequential_ones_in_order() -> None:
    both_started = threading.Barrier(2, timeout=5)
    order: list[str] = []

    @tool
    def left() -> str:
        """Waits for right to start too."""
        both_started.wait()
        return "L"

    @tool
    def right() -> str:
        """Waits for left to start too."""
        both_started.wait()
        return "R"

    @tool(sequential=True)
    def first() -> str:
        """Runs alone, first."""
        time.sleep(0.01)
        order.append("first")
        return "1"

    @tool(sequential=True)
    def second() -> str:
        """Runs alone, after first."""
        order.append("second")
        return "2"

    ex = ToolExecutor({t.name: t for t in (left, right, first, second)})
    outs = await run(ex, call("second", "a"), call("left", "b"), call("first", "c"), call("right", "d"))
    assert [o.content for o in outs] == ["2", "L", "1", "R"]  # results in call order
    assert order == ["second", "first"]  # sequential calls in call order, one at a time


async def test_the_context_reaches_a_tool_and_cancellation_is_never_swallowed() -> None:
    seen: list[ToolContext] = []
    started = asyncio.Event()

    @tool
    async def hang(ctx: ToolContext) -> str:
        """Never returns."""
        seen.append(ctx)
        started.set()
        await asyncio.sleep(3600)
        return "never"

    ex = ToolExecutor({"hang": hang}, deps={"k": "v"})
    task = asyncio.create_task(run(ex, call("hang", "h1")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (seen[0].session_id, seen[0].turn_id, seen[0].tool_use_id, seen[0].deps) == ("s1", "t1", "h1", {"k": "v"})
