"""Fixtures shared by every test suite."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

# The admin connections tried, in order, to create a throw-away database for the session.
_PG_ADMIN = [u for u in (os.environ.get("TURNSTREAM_TEST_PG"),
                         "postgresql://postgres@127.0.0.1:5432/postgres",
                         "postgresql://root@127.0.0.1:5432/postgres") if u]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A URL of a fresh PostgreSQL database for this test session, dropped at its end.

    Fails when no server answers: ``make test`` starts the local one (``scripts/ensure-postgres.sh``),
    and a test that needs PostgreSQL must not pass by being skipped.
    """
    import psycopg
    errors: list[str] = []
    for admin in _PG_ADMIN:
        try:
            conn = psycopg.connect(admin, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as exc:
            errors.append(f"{admin}: {exc}".strip())
            continue
        break
    else:
        pytest.fail("PostgreSQL is not reachable (run scripts/ensure-postgres.sh): " + "; ".join(errors))
    name = f"turnstream_test_{uuid.uuid4().hex[:12]}"
    with conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(admin)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
