from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle
from turnstream.providers.anthropic import AnthropicProvider

_names = itertools.count()


@pytest.fixture
async def provider_for(mock_provider: MockHandle) -> AsyncIterator[Callable[[dict[str, Any]], AnthropicProvider]]:
    """Register a scenario under a fresh name and return an Anthropic adapter that plays it
    (closed at the end of the test)."""
    made: list[AnthropicProvider] = []

    def make(spec: dict[str, Any]) -> AnthropicProvider:
        name = mock_provider.scenario(f"scn-{next(_names)}", spec)
        made.append(AnthropicProvider(name, api_key="test-key", base_url=mock_provider.base_url))
        return made[-1]

    yield make
    for p in made:
        await p.aclose()

