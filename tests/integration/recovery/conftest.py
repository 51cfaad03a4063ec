"""Databases for the recovery tests: a SQLite file, a scratch schema in the session's
PostgreSQL database (so ``recover()`` sees only this test's turns), or a private
PostgreSQL cluster that a test may restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.mock_provider import free_port
from tests.support.pg import Cluster, pg_bindir


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database URL a child process can open too."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'turns.db'}"
        return
    from tests.support.pg import scratch_schema

    async with scratch_schema(request.getfixturevalue("pg_url"), "recovery") as url:
        yield url


@pytest.fixture
def pg_cluster() -> Iterator[Cluster]:
    """A private cluster, started; stopped and removed after the test."""

    root = Path(tempfile.mkdtemp(prefix="turnstream-pg-"))
    cluster = Cluster(pg_bindir(), root, free_port())
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    try:
        subprocess.run([*cluster._as_owner, str(cluster.bindir / "initdb"), "-D", str(cluster.data), "-A", "trust",
                        "-U", "postgres", "-E", "UTF8", "--no-sync"], check=True, capture_output=True, timeout=120)
        cluster.start()
        cluster.wait_ready()
        yield cluster
    finally:
        if (cluster.data / "postmaster.pid").exists():
            cluster.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
