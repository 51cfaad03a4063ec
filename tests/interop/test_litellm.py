"""turnstream through LiteLLM's proxy (1.106.2), translating between formats, in front of
``turnstream mock-provider``: every client format (Anthropic Messages, Chat Completions,
Responses) × both backend formats LiteLLM speaks to it (``openai/`` → the mock's Chat and
Responses routes, ``anthropic/`` → its Messages route) × multi-step tool loops with parallel
calls, large fragmented arguments, thinking, and faults.

The mock refuses any request the real API would refuse (its own 400 messages), so a turn that
completes also proves every follow-up LiteLLM built from turnstream's request was valid.
"""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from tests.interop import servers
from tests.interop.scenarios import SCENARIOS, Tools, check_turn, run_turn, summary
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Provider
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider

CLIENTS = ["anthropic", "openai", "openai-responses"]
BACKENDS = ["openai", "anthropic"]


def client(api: str, model: str, base_url: str) -> Provider:
    key = servers.LITELLM_KEY
    if api == "anthropic":
        return AnthropicProvider(model, api_key=key, base_url=base_url)
    if api == "openai":
        return OpenAIChatProvider(model, api_key=key, base_url=base_url + "/v1")
    return OpenAIResponsesProvider(model, api_key=key, base_url=base_url + "/v1")


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("api", CLIENTS)
async def test_tool_loop(api: str, backend: str, scenario: str, litellm_url: str, mock_url: str,
                         results: dict[str, Any]) -> None:
    name = f"{scenario}-{api}-{backend}"
    httpx.post(mock_url + "/_mock/scenarios", json={name: SCENARIOS[scenario]}).raise_for_status()
    tools = Tools()
    p = client(api, f"{backend}/{name}", litellm_url)
    try:
        turn, events = await run_turn(p, tools, thinking=scenario == "thinking")
    finally:
        await p.aclose()
    check_turn(scenario, turn, events, tools)
    results[f"litellm {api} -> {backend} {scenario}"] = summary(turn, events)


def test_the_proxy_is_the_pinned_version(litellm_url: str) -> None:
    r = httpx.get(litellm_url + "/health/liveliness")
    assert r.status_code == 200
    installed: Any = (servers.HOME / "litellm").glob("lib/python*/site-packages/litellm-*.dist-info")
    assert [p.name for p in installed] == ["litellm-1.106.2.dist-info"]
