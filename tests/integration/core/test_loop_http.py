"""SPEC §0, §3, §4, §5 through the Anthropic adapter against the mock provider over HTTP.

The mock refuses any request the real API would refuse (same rules, same messages), so
every follow-up request in these tests is also checked for validity.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import pytest

from tests.support.limits import fast_limits
from tests.support.mock_provider import MockHandle
from turnstream import Agent, ToolContext, ToolResultBlock, ToolUseBlock, tool
from turnstream.events import BlockDelta, StepRestart, ToolRequest, TurnComplete
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.store import MemoryStore
from turnstream.transcript import INTERRUPTED_RESULT

Make = Callable[[dict[str, Any]], AnthropicProvider]


def tool_step(name: str, args: dict[str, Any], text: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return {"blocks": [*blocks, {"type": "tool_use", "name": name, "input": args}]}


def answer(text: str) -> dict[str, Any]:
    return {"blocks": [{"type": "text", "text": text}]}


def results(turn: Any) -> list[ToolResultBlock]:
    return [b for b in turn.blocks if isinstance(b, ToolResultBlock)]


@tool
async def echo(value: str) -> str:
    """Echo a value."""
    return f"echo:{value}"


async def test_loop_runs_every_step_until_the_model_is_done(provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"fragment_size": 1, "steps": [
        tool_step("echo", {"value": "one"}, "first"), tool_step("echo", {"value": "two"}),
        tool_step("echo", {"value": "three"}), answer("done: {{results[0]}} {{last}}")]})
    turn = await Agent(p, tools=[echo]).run("go")
    assert turn.status == "complete" and turn.stop_reason == "end_turn" and turn.steps == 4
    assert [r.content for r in results(turn)] == ["echo:one", "echo:two", "echo:three"]
    assert turn.text == "done: echo:one echo:three"
    calls = [b for b in turn.blocks if isinstance(b, ToolUseBlock)]
    assert [c.input for c in calls] == [{"value": "one"}, {"value": "two"}, {"value": "three"}]
    assert calls[0].raw_input == '{"value": "one"}'
    assert turn.usage.input_tokens == 40 and len(turn.step_usage) == 4
    # every follow-up carried the assistant's call right before its result
    last = mock_provider.requests(p.model)[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]


async def test_step_limit_answers_calls_with_errors_then_one_call_without_tools(
        provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"steps": [tool_step("echo", {"value": "{{input}}{{last}}"}),
                                tool_step("echo", {"value": "again{{last}}"}),
                                tool_step("echo", {"value": "more"}), answer("final answer")]})
    turn = await Agent(p, tools=[echo], max_steps=2).run("go")
    assert turn.stop_reason == "max_steps" and turn.status == "complete" and turn.steps == 3
    rs = results(turn)
    assert not rs[0].is_error and rs[1].is_error and "max_steps=2" in rs[1].content
    reqs = mock_provider.requests(p.model)
    assert len(reqs) == 3
    assert reqs[-1]["tool_choice"] == {"type": "none"}
    assert "tool_choice" not in reqs[0]


async def test_third_identical_call_is_not_run(provider_for: Make) -> None:
    runs: list[str] = []

    @tool
    def count(x: int) -> str:
        """Count."""
        runs.append("ran")
        return str(len(runs))

    p = provider_for({"steps": [tool_step("count", {"x": 1})] * 3 + [tool_step("count", {"x": 2}), answer("ok")]})
    turn = await Agent(p, tools=[count]).run("go")
    rs = results(turn)
    assert len(runs) == 3  # x=1 twice, x=2 once
    assert rs[2].is_error and "already ran 2 times" in rs[2].content
    assert not rs[3].is_error


async def test_call_cut_by_max_tokens_is_retried_larger_then_refused(
        provider_for: Make, mock_provider: MockHandle) -> None:
    ran: list[dict[str, Any]] = []

    @tool
    def write(code: str) -> str:
        """Write."""
        ran.append({"code": code})
        return "written"

    big = {"type": "tool_use", "name": "write", "input": {"code": "x" * 50}, "cut_at": 20}
    fits = provider_for({"steps": [{"blocks": [{**big, "fits_max_tokens": 16000}]}, answer("ok")]})
    events = [ev async for ev in Agent(fits, tools=[write]).stream("go")]
    assert any(isinstance(e, StepRestart) and "max_tokens" in e.reason for e in events)
    assert ran == [{"code": "x" * 50}]
    assert [r["max_tokens"] for r in mock_provider.requests(fits.model)] == [8192, 16384, 16384]

    ran.clear()
    never = provider_for({"steps": [{"blocks": [big]}, answer("gave up")]})
    turn = await Agent(never, tools=[write]).run("go")
    assert ran == []
    rs = results(turn)
    assert rs[0].is_error and "cut off" in rs[0].content
    assert turn.text == "gave up"


async def test_every_tool_failure_is_an_error_result_the_model_reads(
        provider_for: Make, mock_provider: MockHandle) -> None:
    @tool(timeout=0.2)
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(10)
        return "late"

    @tool
    def boom(n: int) -> str:
        """Raises."""
        raise KeyError(f"no row {n}")

    @tool
    def huge() -> str:
        """Too much output."""
        return "y" * 200

    from turnstream.limits import Limits

    p = provider_for({"steps": [{"blocks": [
        {"type": "tool_use", "name": "boom", "input": {"n": "not a number"}},
        {"type": "tool_use", "name": "boom", "input": {"n": 3}},
        {"type": "tool_use", "name": "nope", "input": {}},
        {"type": "tool_use", "name": "slow", "input": {}},
        {"type": "tool_use", "name": "huge", "input": {}},
        {"type": "tool_use", "name": "boom", "raw": '{"n": 3,,}'},
    ]}, answer("handled")]})
    turn = await Agent(p, tools=[slow, boom, huge], limits=Limits(max_result_chars=50)).run("go")
    assert turn.status == "complete"
    rs = results(turn)
    assert all(r.is_error for r in rs[:4]) and not rs[4].is_error and rs[5].is_error
    assert "Invalid arguments for tool 'boom'" in rs[0].content and "n:" in rs[0].content
    assert rs[1].content == "KeyError: 'no row 3'"
    assert rs[2].content.startswith("Unknown tool 'nope'. Available tools: boom, huge, slow")
    assert rs[3].content == "Tool execution timed out after 0.2s"
    assert rs[4].content.startswith("y" * 50) and "[truncated: the result has 200 characters" in rs[4].content
    assert "not valid JSON" in rs[5].content
    follow_up = mock_provider.requests(p.model)[-1]["messages"][-1]["content"]
    assert [c["is_error"] for c in follow_up if c.get("is_error")] == [True] * 5
    assert [c["tool_use_id"] for c in follow_up] == [b.tool_use_id for b in turn.blocks if isinstance(b, ToolUseBlock)]


async def test_calls_of_a_step_run_concurrently_and_results_keep_call_order(provider_for: Make) -> None:
    gate = asyncio.Event()

    @tool(timeout=5)
    async def waiter() -> str:
        """Waits for the opener."""
        await gate.wait()
        return "opened"

    @tool
    async def opener() -> str:
        """Opens the gate."""
        gate.set()
        return "set"

    p = provider_for({"steps": [{"blocks": [{"type": "tool_use", "name": "waiter", "input": {}},
                                            {"type": "tool_use", "name": "opener", "input": {}}]}, answer("ok")]})
    turn = await Agent(p, tools=[waiter, opener]).run("go")
    assert [r.content for r in results(turn)] == ["opened", "set"]


async def test_sequential_tools_run_one_after_another(provider_for: Make) -> None:
    log: list[str] = []

    @tool(sequential=True)
    async def step(name: str) -> str:
        """A step that must not overlap."""
        log.append(f"start {name}")
        await asyncio.sleep(0)
        log.append(f"end {name}")
        return name

    p = provider_for({"steps": [{"blocks": [{"type": "tool_use", "name": "step", "input": {"name": "a"}},
                                            {"type": "tool_use", "name": "step", "input": {"name": "b"}}]},
                                answer("ok")]})
    await Agent(p, tools=[step]).run("go")
    assert log == ["start a", "end a", "start b", "end b"]


async def test_approval_pauses_then_approve_runs_and_deny_reports(
        provider_for: Make, mock_provider: MockHandle) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    for approved in (True, False):
        p = provider_for({"steps": [{"blocks": [{"type": "tool_use", "name": "delete", "input": {"path": "a.txt"}},
                                                {"type": "tool_use", "name": "echo", "input": {"value": "x"}}]},
                                    answer("after: {{results[0]}}")]})
        agent = Agent(p, tools=[delete, echo])
        events = [ev async for ev in agent.stream("clean up")]
        req = next(e for e in events if isinstance(e, ToolRequest))
        assert req.requires_approval and req.executor == "server" and req.tool_name == "delete"
        done = events[-1]
        assert isinstance(done, TurnComplete) and done.status == "awaiting_client"
        assert ran == ([] if approved else ["a.txt"])  # the sibling echo already ran; delete waits
        assert await agent.submit(req.turn_id, req.tool_use_id, approved=approved)
        turn = await agent.resume(req.turn_id)
        assert turn.status == "complete"
        first = results(turn)[0] if approved else next(r for r in results(turn) if r.tool_use_id == req.tool_use_id)
        if approved:
            assert ran == ["a.txt"]
        else:
            assert first.is_error and "denied" in first.content and ran == ["a.txt"]
        msgs = mock_provider.requests(p.model)[-1]["messages"]
        assert [c["tool_use_id"] for c in msgs[-1]["content"]] == [
            b.tool_use_id for b in turn.blocks if isinstance(b, ToolUseBlock)]


async def test_client_tool_round_trip(provider_for: Make) -> None:
    p = provider_for({"steps": [tool_step("read_editor", {"file": "main.py"}), answer("the file says {{last}}")]})
    agent = Agent(p)
    spec = [{"name": "read_editor", "description": "Read the open editor.",
             "input_schema": {"type": "object", "properties": {"file": {"type": "string"}}}}]
    turn = await agent.run("what is open?", client_tools=spec)
    assert turn.status == "awaiting_client" and turn.stop_reason == "awaiting_client"
    call = next(b for b in turn.blocks if isinstance(b, ToolUseBlock))
    with pytest.raises(LookupError):
        await agent.submit(turn.id, "toolu_unknown", content="x")
    assert await agent.submit(turn.id, call.tool_use_id, content="print(1)")
    done = await agent.resume(turn.id)
    assert done.status == "complete" and done.text == "the file says print(1)"


async def test_mid_stream_overload_restarts_the_step_without_duplicates(provider_for: Make) -> None:
    p = provider_for({"steps": [{**tool_step("echo", {"value": "v"}, "thinking about it"),
                                 "fault": {"kind": "error_event", "after_events": 5}}, answer("fine")]})
    agent = Agent(p, tools=[echo], limits=fast_limits())
    events = [ev async for ev in agent.stream("go")]
    restarts = [e for e in events if isinstance(e, StepRestart)]
    assert len(restarts) == 1 and "Overloaded" in restarts[0].reason
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "complete"
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None
    assert [b.seq for b in turn.blocks] == list(range(len(turn.blocks)))
    assert [b.type for b in turn.blocks] == ["text", "tool_use", "tool_result", "text"]


async def test_stream_without_final_event_never_runs_its_tool_call(provider_for: Make) -> None:
    ran: list[str] = []

    @tool
    def act() -> str:
        """Act."""
        ran.append("x")
        return "done"

    p = provider_for({"steps": [{**tool_step("act", {}), "fault": {"kind": "truncate", "times": 99}}]})
    agent = Agent(p, tools=[act], limits=fast_limits())
    events = [ev async for ev in agent.stream("go")]
    assert ran == []
    assert sum(isinstance(e, StepRestart) for e in events) == 2
    err = next(e for e in events if e.name == "error")
    assert err.data()["code"] == "stream_broken"
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "failed"
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None
    rs = results(turn)
    assert rs and all(r.is_error for r in rs)  # the unrun call is closed out, transcript valid


async def test_status_529_with_retry_after_is_retried(provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"steps": [{**answer("hello"), "fault": {"kind": "status", "status": 529, "retry_after": 0,
                                                               "times": 2}}]})
    turn = await Agent(p, limits=fast_limits()).run("go")
    assert turn.status == "complete" and turn.text == "hello"
    assert len(mock_provider.requests(p.model)) == 3


async def test_non_retryable_error_fails_the_turn_keeping_its_blocks(provider_for: Make) -> None:
    p = provider_for({"steps": [{"blocks": [{"type": "text", "text": "partial answer here"}],
                                 "fault": {"kind": "error_event", "after_events": 5,
                                           "error_type": "invalid_request_error", "message": "bad", "times": 9}}]})
    agent = Agent(p, limits=fast_limits())
    events = [ev async for ev in agent.stream("go")]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "failed" and done.stop_reason == "error"
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None and turn.blocks[0].type == "text"
    assert turn.blocks[0].text.startswith("partial")  # type: ignore[union-attr]


async def test_thinking_is_sent_back_unchanged_with_its_tool_call(
        provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"steps": [{"blocks": [{"type": "thinking", "thinking": "Let me think.", "signature": "SIG=="},
                                            {"type": "tool_use", "name": "echo", "input": {"value": "a"}}]},
                                answer("ok")]})
    await Agent(p, tools=[echo]).run("go")
    follow = mock_provider.requests(p.model)[-1]["messages"][1]["content"]
    assert follow[0] == {"type": "thinking", "thinking": "Let me think.", "signature": "SIG=="}
    assert follow[1]["type"] == "tool_use"


async def test_cancel_keeps_partial_blocks_and_the_session_goes_on(
        provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"fragment_size": 2, "delay_ms": 5, "turns": [
        [{"blocks": [{"type": "text", "text": "a long answer " * 20}]}], [answer("second turn ok")]]})
    store = MemoryStore()
    agent = Agent(p, store=store, session_id="s-cancel")
    seen = 0
    async with aclosing(agent.stream("first")) as events:
        async for ev in events:
            if isinstance(ev, BlockDelta):
                seen += 1
                if seen == 3:
                    break  # leaving the stream cancels the turn
    turns = await store.list_turns("s-cancel")
    assert turns[0].status == "cancelled" and turns[0].stop_reason == "cancelled"
    assert turns[0].blocks and turns[0].blocks[0].text.startswith("a long")  # type: ignore[union-attr]
    second = await agent.run("second", session_id="s-cancel")
    assert second.text == "second turn ok"
    history = mock_provider.requests(p.model)[-1]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]


async def test_next_message_after_a_crash_closes_out_the_dangling_call(
        provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"turns": [[tool_step("echo", {"value": "x"})], [answer("recovered")]]})
    store = MemoryStore()
    agent = Agent(p, store=store, session_id="s-crash", tools=[echo])
    await agent._session(None)
    crashed = await store.create_turn("s-crash", "first", model=p.origin)
    from turnstream.store.protocol import StoredEvent

    dangling = ToolUseBlock(seq=0, step=1, tool_use_id="toolu_dangling", name="echo", input={"value": "x"})
    await store.append_block(crashed.id, dangling, StoredEvent(crashed.id, 1, "block_stop", {}))
    await store.set_status(crashed.id, "interrupted")  # left so by a process that died (no close-out)
    turn = await agent.run("are you there?")
    assert turn.text == "recovered"
    msgs = mock_provider.requests(p.model)[-1]["messages"]
    closed = msgs[2]["content"][0]
    assert closed == {"type": "tool_result", "tool_use_id": "toolu_dangling", "content": INTERRUPTED_RESULT,
                      "is_error": True}
    assert msgs[2]["content"][1] == {"type": "text", "text": "are you there?", "cache_control": {"type": "ephemeral"}}


async def test_sync_tools_run_in_a_thread_with_context(provider_for: Make) -> None:
    main = threading.get_ident()

    @tool
    def where(ctx: ToolContext) -> str:
        """Where am I."""
        return json.dumps({"thread": threading.get_ident() != main, "turn": bool(ctx.turn_id),
                           "dep": ctx.deps.get("k")})

    p = provider_for({"steps": [tool_step("where", {}), answer("{{last.thread}} {{last.dep}}")]})
    assert "ctx" not in where.input_schema.get("properties", {})
    turn = await Agent(p, tools=[where], deps={"k": "v"}).run("go")
    assert turn.text == "true v"


async def test_a_call_id_reused_by_the_server_in_a_later_turn_is_made_unique(
        provider_for: Make, mock_provider: MockHandle) -> None:
    reused = {"type": "tool_use", "id": "call_1", "name": "echo", "input": {"value": "x"}}
    p = provider_for({"turns": [[{"blocks": [reused]}, answer("one")], [{"blocks": [reused]}, answer("two")]]})
    agent = Agent(p, tools=[echo], store=MemoryStore(), session_id="s-reuse")
    await agent.run("first")
    second = await agent.run("second")
    ids = [b.tool_use_id for b in second.blocks if isinstance(b, ToolUseBlock)]
    assert ids == ["call_1_2"] and results(second)[0].tool_use_id == "call_1_2"
    history = mock_provider.requests(p.model)[-1]["messages"]
    sent = [c["id"] for m in history if m["role"] == "assistant" for c in m["content"] if c["type"] == "tool_use"]
    assert sent == ["call_1", "call_1_2"]


async def test_cancel_while_a_tool_runs_answers_every_call(provider_for: Make) -> None:
    started = asyncio.Event()

    @tool(timeout=30)
    async def forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    p = provider_for({"steps": [{"blocks": [{"type": "tool_use", "name": "forever", "input": {}},
                                            {"type": "tool_use", "name": "echo", "input": {"value": "v"}}]}]})
    agent = Agent(p, tools=[forever, echo])
    events: list[Any] = []

    async def consume() -> None:
        async for ev in agent.stream("go"):
            events.append(ev)

    task = asyncio.create_task(consume())
    await started.wait()
    assert agent.cancel(events[0].turn_id)
    await task
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.status == "cancelled"
    turn = await agent.store.get_turn(done.turn_id)
    assert turn is not None
    rs = results(turn)
    assert len(rs) == 2 and all(r.is_error and "cancelled" in r.content for r in rs)


async def test_a_failing_approver_fails_the_turn_cleanly(provider_for: Make) -> None:
    @tool(requires_approval=True)
    def risky() -> str:
        """Needs approval."""
        return "ran"

    async def broken(call: ToolUseBlock, t: Any) -> bool:
        raise RuntimeError("approval service down")

    p = provider_for({"steps": [tool_step("risky", {}), answer("never")]})
    turn = await Agent(p, tools=[risky], approve=broken).run("go")
    assert turn.status == "failed" and turn.error == "RuntimeError: approval service down"
    assert results(turn)[0].is_error


async def test_debug_log_has_the_request_but_never_the_key(
        provider_for: Make, caplog: pytest.LogCaptureFixture) -> None:
    p = provider_for({"steps": [answer("hi")]})
    p.api_key = "sk-secret-value"
    p._headers["x-api-key"] = p.api_key
    with caplog.at_level("DEBUG", logger="turnstream.providers"):
        await Agent(p).run("log me")
    text = caplog.text
    assert "log me" in text and "x-api-key" in text
    assert "sk-secret-value" not in text


async def test_thinking_budget_is_sent_and_thinking_leads_the_replayed_tool_call(
        provider_for: Make, mock_provider: MockHandle) -> None:
    p = provider_for({"steps": [{"blocks": [{"type": "thinking", "thinking": "plan", "signature": "S"},
                                            {"type": "tool_use", "name": "echo", "input": {"value": "a"}}]},
                                answer("ok")]})
    turn = await Agent(p, tools=[echo], thinking_budget=2048).run("go")
    assert turn.status == "complete"
    reqs = mock_provider.requests(p.model)
    assert all(r["thinking"] == {"type": "enabled", "budget_tokens": 2048} for r in reqs)
    # the mock applies the API's rule: with thinking on, the pending call's message starts with thinking
    assert reqs[-1]["messages"][1]["content"][0]["type"] == "thinking"
