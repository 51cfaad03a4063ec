"""turnstream's Responses client through open-responses-server 0.4.1 (a Responses-to-Chat bridge)
in front of ``turnstream mock-provider``'s Chat route.

The bridge announces no output item (issue 14, point 4), sends no usage (point 7) and answers
a wrong path with ``200 text/event-stream`` ``Not Found`` (point 3). It also drops the
``function_call`` items of the input (it keeps conversations itself, by
``previous_response_id``), so a stateless client cannot finish a tool loop through it: that
test is marked as an expected failure, strictly, so that a fixed bridge shows up.
"""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from tests.interop.scenarios import PARALLEL_CALLS, SCENARIOS, Tools, check_turn, run_turn
from turnstream.assemble import Assembler
from turnstream.blocks import TextBlock, ToolUseBlock
from turnstream.errors import ProviderProtocolError
from turnstream.providers.base import Message, ModelRequest, ToolSpec
from turnstream.providers.openai_responses import OpenAIResponsesProvider

TEXT = {"fragment_size": 4, "steps": [{"blocks": [{"type": "text", "text": "Sunny in Paris today."}]}]}


def register(mock_url: str, name: str, spec: dict[str, Any]) -> str:
    httpx.post(mock_url + "/_mock/scenarios", json={name: spec}).raise_for_status()
    return name


async def test_text_answer(ors_url: str, mock_url: str) -> None:
    p = OpenAIResponsesProvider(register(mock_url, "ors-text", TEXT), api_key="none", base_url=ors_url)
    try:
        turn, _ = await run_turn(p, Tools())
    finally:
        await p.aclose()
    assert (turn.status, turn.stop_reason, turn.text) == ("complete", "end_turn", "Sunny in Paris today.")
    assert turn.usage.unknown, "the bridge reports no usage: unknown, not zero"


async def test_parallel_calls_of_a_step_arrive_whole(ors_url: str, mock_url: str) -> None:
    name = register(mock_url, "ors-parallel-step", SCENARIOS["parallel"])
    p = OpenAIResponsesProvider(name, api_key="none", base_url=ors_url)
    spec = ToolSpec("get_weather", "Weather for a city.", {"type": "object"})
    asm = Assembler(step=1, first_seq=0, origin=p.origin, provider=p.name)
    try:
        async for ev in p.stream(ModelRequest(name, [Message("user", ["Weather?"])], tools=[spec])):
            asm.feed(ev)
    finally:
        await p.aclose()
    assert asm.stop_reason == "tool_use"
    calls = [(b.name, b.input) for b in asm.finished if isinstance(b, ToolUseBlock)]
    assert calls == PARALLEL_CALLS[:2]
    assert [b.text for b in asm.finished if isinstance(b, TextBlock)] == ["Let me look."]


async def test_wrong_base_url_says_what_the_body_was(ors_url: str) -> None:
    p = OpenAIResponsesProvider("ors-text", api_key="none", base_url=ors_url + "/v1")
    try:
        with pytest.raises(ProviderProtocolError, match="not an event stream: b'Not Found'"):
            async for _ in p.stream(ModelRequest("ors-text", [Message("user", ["q"])])):
                pass
    finally:
        await p.aclose()


@pytest.mark.xfail(strict=True, reason="open-responses-server 0.4.1 drops function_call input items, so the "
                                       "backend never sees the calls and replays the first step")
async def test_tool_loop(ors_url: str, mock_url: str) -> None:
    tools = Tools()
    p = OpenAIResponsesProvider(register(mock_url, "ors-parallel", SCENARIOS["parallel"]), api_key="none",
                                base_url=ors_url)
    try:
        turn, events = await run_turn(p, tools)
    finally:
        await p.aclose()
    check_turn("parallel", turn, events, tools)
