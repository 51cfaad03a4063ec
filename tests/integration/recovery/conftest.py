"""Databases for the recovery tests: a SQLite file, a scratch schema in the session's
PostgreSQL database (so ``recover()`` sees only this test's turns), or a private
PostgreSQL cluster that a test may restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A database URL a child process can open too."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'turns.db'}"
        return
    from tests.support.pg import scratch_schema

    async with scratch_schema(request.getfixturevalue("pg_url"), "recovery") as url:
        yield url


class Cluster:
    """A private PostgreSQL cluster (the installed server binaries, a temporary data
    directory, a free port) that a test may stop and restart without disturbing the shared
    server on 5432 that other tests and processes use."""

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir, self.root, self.port = bindir, root, port
        self.data = root / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"

    def pg_ctl(self, *args: str, wait: bool = True) -> subprocess.Popen[bytes]:
        """``pg_ctl ACTION`` on this cluster (logging to a file: the server must not hold our pipes)."""
        cmd = [*self._as_owner, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
               "-w", "-t", "60", *args]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if wait:
            _, err = proc.communicate(timeout=90)
            assert proc.returncode == 0, f"pg_ctl {' '.join(args)}: {err.decode()} {self.log()}"
        return proc

    def start(self, wait: bool = True) -> subprocess.Popen[bytes]:
        return self.pg_ctl("-o", self.options, "start", wait=wait)

    def log(self) -> str:
        path = self.root / "log"
        return path.read_text()[-2000:] if path.exists() else ""

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Bounded wait until the server accepts connections (``pg_isready``)."""
        deadline = time.monotonic() + timeout
        while subprocess.run([str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port),
                              "-U", "postgres"],
                             timeout=10).returncode != 0:
            if time.monotonic() > deadline:
                pytest.fail(f"PostgreSQL did not come back within {timeout}s: {self.log()}")
            time.sleep(0.05)  # polling a condition, bounded by the deadline


def _bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    return Path(initdb).parent


@pytest.fixture
def pg_cluster() -> Iterator[Cluster]:
    """A private cluster, started; stopped and removed after the test."""
    from tests.support.mock_server import free_port

    root = Path(tempfile.mkdtemp(prefix="turnstream-pg-"))
    cluster = Cluster(_bindir(), root, free_port())
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
