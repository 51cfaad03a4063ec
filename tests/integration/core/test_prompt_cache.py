"""Prompt caching in the loop, through the adapters against the mock provider over HTTP.

Anthropic: every request of a 3-step turn passes the mock's cache rules (at most four
breakpoints, on blocks that may carry them), the tools and system breakpoints stay where
they were, and each step's earlier conversation breakpoint is the previous step's last one,
so each step reads what the one before wrote (the mock counts it as the API does).
OpenAI: one ``prompt_cache_key`` per session, for every step and turn, settable.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tests.support.mock_provider import MockHandle
from turnstream import Agent, tool
from turnstream.events import StepUsage, StreamEvent, TurnComplete
from turnstream.mock.validate import anthropic_errors, cache_breakpoints
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider
from turnstream.store import MemoryStore

SYSTEM = "You answer questions about the weather. " * 150  # about 1,500 tokens: long enough to cache
THREE_STEPS = {"steps": [
    {"blocks": [{"type": "tool_use", "name": "lookup", "input": {"city": "Paris"}}]},
    {"blocks": [{"type": "tool_use", "name": "lookup", "input": {"city": "Rome"}}]},
    {"blocks": [{"type": "text", "text": "Both are sunny."}]}]}


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny"


def without_marks(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("messages",)}


async def test_a_three_step_turn_keeps_its_breakpoints_stable_and_reads_what_the_last_step_wrote(
        provider_for: Callable[[dict[str, Any]], AnthropicProvider], mock_provider: MockHandle) -> None:
    p = provider_for(THREE_STEPS)
    events: list[StreamEvent] = []
    agent = Agent(p, tools=[lookup], system=SYSTEM)
    async for ev in agent.stream("Weather in Paris and Rome?"):
        events.append(ev)
    reqs = mock_provider.requests(p.model)
    assert len(reqs) == 3
    marks = [cache_breakpoints(r) for r in reqs]
    for r, m in zip(reqs, marks, strict=True):
        assert anthropic_errors(r) is None and 1 <= len(m) <= 4
        assert [path for path, _ in m][:2] == ["tools.0", "system.0"]
    assert without_marks(reqs[0]) == without_marks(reqs[1]) == without_marks(reqs[2])  # tools, system: same bytes
    # Each step's earlier conversation breakpoint is the block where the previous step put its last one.
    for before, after in itertools.pairwise(marks):
        assert after[-2] == before[-1]
    usages = [e for e in events if isinstance(e, StepUsage)]
    reads = [u.usage.cache_read_input_tokens for u in usages]
    writes = [u.usage.cache_creation_input_tokens for u in usages]
    assert reads[0] == 0 and writes[0] > 1024
    assert reads[1] == reads[0] + writes[0] and reads[2] == reads[1] + writes[1]  # all of it read back
    assert all(w > 0 for w in writes[1:])
    (done,) = [e for e in events if isinstance(e, TurnComplete)]
    assert done.usage.cache_read_input_tokens == sum(reads)
    assert done.usage.cache_creation_input_tokens == sum(writes)


async def test_the_mock_refuses_breakpoints_the_api_refuses(mock_provider: MockHandle) -> None:
    import httpx2 as httpx

    name = mock_provider.scenario("cache-rules", {"steps": [{"blocks": [{"type": "text", "text": "ok"}]}]})
    mark = {"type": "ephemeral"}
    too_many = {"model": name, "max_tokens": 10, "stream": True,
                "system": [{"type": "text", "text": f"s{i}", "cache_control": mark} for i in range(5)],
                "messages": [{"role": "user", "content": "hi"}]}
    on_thinking = {"model": name, "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s",
                                           "cache_control": mark}, {"type": "text", "text": "a"}]},
        {"role": "user", "content": "more"}]}
    async with httpx.AsyncClient() as client:
        r1 = await client.post(mock_provider.base_url + "/v1/messages", json=too_many)
        r2 = await client.post(mock_provider.base_url + "/v1/messages", json=on_thinking)
    assert r1.status_code == 400
    assert r1.json()["error"]["message"] == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    assert r2.status_code == 400
    assert r2.json()["error"]["message"] == ("messages.1.content.0.thinking.cache_control: "
                                             "Extra inputs are not permitted")


async def test_openai_gets_one_prompt_cache_key_per_session(mock_provider: MockHandle) -> None:
    name = mock_provider.scenario("cache-key", THREE_STEPS)
    store = MemoryStore()
    chat = OpenAIChatProvider(name, api_key="k", base_url=mock_provider.base_url + "/v1")
    chat.openai_native = True  # the key goes to OpenAI's own host only; the mock stands in for it here
    responses = OpenAIResponsesProvider(name, api_key="k", base_url=mock_provider.base_url + "/v1")
    responses.openai_native = True
    sessions: list[tuple[str, str]] = []
    try:
        for provider in (chat, responses):
            agent = Agent(provider, tools=[lookup], store=store)
            first = await agent.run("one")
            await agent.run("two", session_id=first.session_id)
            other = await agent.run("three")
            sessions.append((first.session_id, other.session_id))
            keyed = Agent(provider, tools=[lookup], store=store, prompt_cache_key="tenant-7")
            await keyed.run("four")
        keys = [r.get("prompt_cache_key") for r in mock_provider.requests(name)]
        assert len(keys) == 2 * 4 * 3
        for k, (one, three) in zip((0, 12), sessions, strict=True):  # chat, then responses: 3 steps a turn
            assert keys[k:k + 6] == [f"turnstream-{one}"] * 6  # turns one and two: one session, one key
            assert keys[k + 6:k + 9] == [f"turnstream-{three}"] * 3 != keys[k:k + 3]
            assert keys[k + 9:k + 12] == ["tenant-7"] * 3
    finally:
        await chat.aclose()
        await responses.aclose()


async def test_a_gateway_gets_no_prompt_cache_key(mock_provider: MockHandle) -> None:
    # LiteLLM 1.106.2 refuses the field when it routes to a backend without it (tests/interop):
    # only OpenAI's own host gets it, in both OpenAI formats.
    name = mock_provider.scenario("cache-key-gateway", THREE_STEPS)
    providers = [OpenAIChatProvider(name, api_key="k", base_url=mock_provider.base_url + "/v1"),
                 OpenAIResponsesProvider(name, api_key="k", base_url=mock_provider.base_url + "/v1")]
    try:
        for provider in providers:
            await Agent(provider, tools=[lookup], store=MemoryStore()).run("one")
        sent = mock_provider.requests(name)
        assert len(sent) == 2 * 3 and not [r for r in sent if "prompt_cache_key" in r]
    finally:
        for provider in providers:
            await provider.aclose()
