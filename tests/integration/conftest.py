"""Fixtures shared by the integration suites: the mock provider over real HTTP."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.support.mock_server import MockHandle, running_mock

_scenario_names = itertools.count()


@pytest.fixture(scope="session")
def mock_server() -> Iterator[MockHandle]:
    """The mock provider (Anthropic, Chat Completions and Responses routes) served by uvicorn in
    a background thread on a free port, for the whole test session."""
    with running_mock() as handle:
        yield handle


@pytest.fixture
def scenario_name() -> Iterator[str]:
    """A fresh scenario name per use, so tests sharing the session's mock never collide."""
    yield f"it-{next(_scenario_names)}"
