"""Fixtures shared by every test suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# The interop suite starts third-party servers from their own environments (minutes on a first
# run): it runs under ``make interop`` (TURNSTREAM_INTEROP=1), not in ``make test``.
collect_ignore = [] if os.environ.get("TURNSTREAM_INTEROP") else ["interop"]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A URL of a fresh PostgreSQL database for this test session, dropped at its end.

    Fails when no server answers: ``make test`` starts the local one (``scripts/ensure-postgres.sh``),
    and a test that needs PostgreSQL must not pass by being skipped.
    """
    from tests.support.pg import scratch_database

    with scratch_database("turnstream_test") as url:
        yield url
