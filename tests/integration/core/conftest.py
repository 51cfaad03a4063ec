from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.mock_provider import MockHandle, ProviderOf, adapter
from turnstream.providers import Provider
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


@pytest.fixture
async def provider_of(mock_provider: MockHandle) -> AsyncIterator[ProviderOf]:
    """Register a scenario under a fresh name and return an adapter of the given wire format
    that plays it (closed at the end of the test)."""
    made: list[Provider] = []

    def make(kind: str, spec: dict[str, Any]) -> Provider:
        made.append(adapter(kind, mock_provider.scenario(f"scn-{next(_names)}", spec), mock_provider.base_url))
        return made[-1]

    yield make
    for p in made:
        await p.aclose()
