from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tests.support.mock_server import MockHandle, running_mock
from turnstream.limits import Limits
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.retry import RetryPolicy

_names = itertools.count()


@pytest.fixture(scope="session")
def mock() -> Iterator[MockHandle]:
    with running_mock() as handle:
        yield handle


@pytest.fixture
async def provider_for(mock: MockHandle) -> AsyncIterator[Callable[[dict[str, Any]], AnthropicProvider]]:
    """Register a scenario under a fresh name and return an Anthropic adapter that plays it
    (closed at the end of the test)."""
    made: list[AnthropicProvider] = []

    def make(spec: dict[str, Any]) -> AnthropicProvider:
        name = mock.scenario(f"scn-{next(_names)}", spec)
        made.append(AnthropicProvider(name, api_key="test-key", base_url=mock.base_url))
        return made[-1]

    yield make
    for p in made:
        await p.aclose()


def fast_limits(**kw: Any) -> Limits:
    return Limits(retry=RetryPolicy(base_delay=0.001, max_delay=0.01), **kw)
