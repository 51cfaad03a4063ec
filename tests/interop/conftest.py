"""The interop suite's servers, started once per session (``make interop``)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop import servers


@pytest.fixture(scope="session")
def mock_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp, servers.mock_provider(Path(tmp)) as url:
        yield url


@pytest.fixture(scope="session")
def litellm_url(mock_url: str) -> Iterator[str]:
    with servers.litellm_proxy(mock_url) as url:
        yield url


@pytest.fixture(scope="session")
def ors_url(mock_url: str) -> Iterator[str]:
    with servers.open_responses_server(mock_url) as url:
        yield url


@pytest.fixture(scope="session")
def portkey_url() -> Iterator[str]:
    with servers.portkey_gateway() as url:
        yield url


@pytest.fixture(scope="session")
def results() -> Iterator[dict[str, Any]]:
    """What each passing turn showed beyond correctness (kept thinking, restarts, usage), written
    to ``.interop/results.json`` for docs/compatibility.md."""
    found: dict[str, Any] = {}
    yield found
    servers.HOME.mkdir(parents=True, exist_ok=True)
    (servers.HOME / "results.json").write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The first test also waits for the environments to be made (about a minute on a first run).
    for item in items:
        item.add_marker(pytest.mark.timeout(600))
