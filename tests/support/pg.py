"""Admin work on the test PostgreSQL server: throw-away databases and schemas, and queries
behind a store's back, through the driver the store uses (asyncpg).

The helpers are coroutines; synchronous fixtures run them with ``run``, in a thread and on
an event loop of their own: the loop of the test (pytest-asyncio's) is never touched, and a
sync fixture may be requested from inside it (``request.getfixturevalue`` in an async one).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg
import pytest

T = TypeVar("T")

# The admin connections tried, in order, to create a throw-away database.
ADMIN_URLS = [u for u in (os.environ.get("TURNSTREAM_TEST_PG"),
                          "postgresql://postgres@127.0.0.1:5432/postgres",
                          "postgresql://root@127.0.0.1:5432/postgres") if u]

# What connecting to a server that is down (refused, or timed out: TimeoutError is an
# OSError), or that refuses this role, raises.
CONNECT_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run admin work from synchronous code (a sync fixture), whether or not this thread is
    running an event loop."""
    with ThreadPoolExecutor(1, thread_name_prefix="pg-admin") as pool:
        return pool.submit(asyncio.run, coro).result()


async def execute(url: str, *statements: str) -> None:
    """Run statements one by one, each committing on its own (``CREATE DATABASE`` cannot run
    inside a transaction)."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        for sql in statements:
            await conn.execute(sql)
    finally:
        await conn.close()


async def fetch(url: str, query: str) -> list[tuple[Any, ...]]:
    """The rows of one query, as tuples."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return [tuple(row) for row in await conn.fetch(query)]
    finally:
        await conn.close()


async def _create_database(prefix: str, hint: str) -> tuple[str, str]:
    """Create a database on the first admin URL that answers: (admin URL, new database's URL)."""
    errors: list[str] = []
    for admin in ADMIN_URLS:
        try:
            conn = await asyncpg.connect(admin, timeout=5)
        except CONNECT_ERRORS as exc:
            errors.append(f"{admin}: {type(exc).__name__}: {exc}".strip())
            continue
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return admin, urlsplit(admin)._replace(path=f"/{name}").geturl()
    pytest.fail(f"PostgreSQL is not reachable ({hint}): " + "; ".join(errors))


@contextmanager
def scratch_database(prefix: str, hint: str = "run scripts/ensure-postgres.sh") -> Iterator[str]:
    """The URL of a new, empty database, dropped afterwards (even with connections left open).
    Fails the test when no server answers: a test that needs PostgreSQL must not pass by being
    skipped."""
    admin, url = run(_create_database(prefix, hint))
    try:
        yield url
    finally:
        name = urlsplit(url).path.lstrip("/")
        run(execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def with_search_path(url: str, schema: str) -> str:
    """``url`` seeing ``schema`` first (the server's ``options`` startup parameter)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@asynccontextmanager
async def scratch_schema(url: str, prefix: str) -> AsyncIterator[str]:
    """The database at ``url`` seen through a new, empty schema (``search_path``), dropped
    afterwards: a fresh, unmigrated database for one test at the cost of a schema."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    await execute(url, f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(url, schema)
    finally:
        await execute(url, f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def scratch_schema_sync(url: str, prefix: str) -> Iterator[str]:
    """``scratch_schema`` for synchronous fixtures."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    run(execute(url, f"CREATE SCHEMA {schema}"))
    try:
        yield with_search_path(url, schema)
    finally:
        run(execute(url, f"DROP SCHEMA {schema} CASCADE"))


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


def pg_bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    return Path(initdb).parent
