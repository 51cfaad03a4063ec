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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """``db_url`` for synchronous tests (a server started as a child process opens it)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'turns.db'}"
        return
    from tests.support.pg import scratch_schema_sync

    with scratch_schema_sync(request.getfixturevalue("pg_url"), "takeover") as url:
        yield url


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with two FIFOs a scripted tool waits on: ``started`` and ``never``."""
    d = tmp_path / "takeover"
    d.mkdir()
    os.mkfifo(d / "started")
    os.mkfifo(d / "never")
    return d


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


@pytest.fixture
def pg_on_small_disk() -> Iterator[tuple[Cluster, Path]]:
    """A private cluster whose data directory is a 40 MiB filesystem of its own (tmpfs) that a
    test can fill; its WAL lives elsewhere, so a full disk fails the writes of table data (an
    error to the client) rather than the WAL (a PANIC that stops the whole server)."""
    root = Path(tempfile.mkdtemp(prefix="turnstream-pg-"))  # the server's user can reach it (tmp_path: 0700)
    disk = root / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], check=True, capture_output=True)
    cluster = Cluster(pg_bindir(), root, free_port())
    cluster.data = disk / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(disk, "postgres")
    try:
        subprocess.run([*cluster._as_owner, str(cluster.bindir / "initdb"), "-D", str(cluster.data), "-A", "trust",
                        "-U", "postgres", "-E", "UTF8", "--no-sync", f"--waldir={root / 'wal'}"],
                       check=True, capture_output=True, timeout=120)
        cluster.start()
        cluster.wait_ready()
        yield cluster, disk
    finally:
        if (cluster.data / "postmaster.pid").exists():
            cluster.pg_ctl("-m", "immediate", "stop")
        subprocess.run(["umount", "-l", str(disk)], check=False)
        shutil.rmtree(root, ignore_errors=True)
