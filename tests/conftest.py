"""Fixtures every suite shares, and the guards that keep a test from leaking.

* The environment: ``TURNSTREAM_*``, ``ANTHROPIC_*`` and ``OPENAI_*`` variables of the shell
  that runs the tests are removed for every test (``TURNSTREAM_TEST_*``, which configures the
  suite itself, stays), so a developer's key or database never reaches a test, and a test
  sets what it needs with ``monkeypatch.setenv``.
* The network: this process may open connections (TCP) only to loopback (and Unix sockets;
  a UDP socket's ``connect`` sends nothing and is left alone). A test that
  must reach another address says so with ``@pytest.mark.network``; nothing in this suite
  does, and no test reaches a real provider.
* ``mock_provider``: one ``turnstream mock-provider`` process for the session.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator

import pytest

from tests.support.mock_provider import MockHandle, running_mock_provider
from tests.support.network import guarded_connect, guarded_connect_ex

# The interop suite starts third-party servers from their own environments (minutes on a first
# run): it runs under ``make interop`` (TURNSTREAM_INTEROP=1), not in ``make test``.
collect_ignore = [] if os.environ.get("TURNSTREAM_INTEROP") else ["interop"]
# The cluster suite builds network namespaces and runs HAProxy (root): it runs under
# ``make test-cluster`` (TURNSTREAM_CLUSTER=1), which ``.ci/run`` calls after ``make test``.
if not os.environ.get("TURNSTREAM_CLUSTER"):
    collect_ignore.append("cluster")

_LEAKY_PREFIXES = ("TURNSTREAM_", "ANTHROPIC_", "OPENAI_")
_scenario_names = itertools.count()


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(_LEAKY_PREFIXES) and not name.startswith("TURNSTREAM_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _loopback_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setattr(socket.socket, "connect", guarded_connect)
        monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)


@pytest.fixture(scope="session")
def mock_provider() -> Iterator[MockHandle]:
    """``turnstream mock-provider`` (the Anthropic, Chat Completions and Responses routes), one
    process for the whole session; tests register scenarios under names of their own."""
    with running_mock_provider() as handle:
        yield handle


@pytest.fixture
def scenario_name() -> str:
    """A fresh scenario name per use, so tests sharing the session's mock never collide."""
    return f"it-{next(_scenario_names)}"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A URL of a fresh PostgreSQL database for this test session, dropped at its end.

    Fails when no server answers: ``make test`` starts the local one (``scripts/ensure-postgres.sh``),
    and a test that needs PostgreSQL must not pass by being skipped.
    """
    from tests.support.pg import scratch_database

    with scratch_database("turnstream_test") as url:
        yield url
