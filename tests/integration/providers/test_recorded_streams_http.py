"""Every recorded stream served over real HTTP by the mock provider (``{"replay": path,
"seed": n}``: the recorded bytes in random pieces) to the real provider class of its API. What
``Provider.stream()`` yields assembles to exactly what the parser gives for the whole body
in one piece (``tests/unit/providers``), error cases included.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from tests.support.replay import Case, assemble, cases, drive
from turnstream.errors import ProviderError
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Message, ModelRequest, Provider, ProviderEvent
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider

ALL = cases()


def provider(c: Case, model: str, base_url: str) -> Provider:
    if c.api == "anthropic-messages":
        return AnthropicProvider(model, api_key="test-key", base_url=base_url)
    if c.api == "openai-chat":
        # tool_id_style pinned so an id the stream lacks would be made the same way as in the unit run
        return OpenAIChatProvider(model, api_key="test-key", base_url=base_url + "/v1", tool_id_style="openai")
    return OpenAIResponsesProvider(model, api_key="test-key", base_url=base_url + "/v1", tool_id_style="openai")


def _summary(api: str, events: list[ProviderEvent], error: ProviderError | None) -> tuple[Any, ...]:
    asm = assemble(api, events)
    err = None if error is None else (type(error).__name__, error.message, error.retryable)
    step = None if asm.step is None else (asm.step.stop_reason, asm.step.usage)
    return [b.model_dump() for b in asm.blocks], asm.closed, step, err


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("c", ALL, ids=[c.id for c in ALL])
async def test_replayed_over_http(c: Case, seed: int, mock_provider: MockHandle, scenario_name: str) -> None:
    name = mock_provider.scenario(scenario_name, {"replay": str(c.sse), "seed": seed, "max_piece": 97})
    p = provider(c, name, mock_provider.base_url)
    events: list[ProviderEvent] = []
    error: ProviderError | None = None
    try:
        request = ModelRequest(model=name, messages=[Message("user", ["Hello"])], max_tokens=256)
        async for ev in p.stream(request):
            events.append(ev)
    except ProviderError as exc:
        error = exc
    finally:
        await p.aclose()
    reference = drive(c.api, [c.body])
    assert _summary(c.api, events, error) == _summary(c.api, reference.events, reference.error)
