"""A real ``turnstream serve`` (SQLite, the default notebook toolset, bubblewrap sandbox) with
two users: alice (the server's own key) attacks, bob keeps a kernel with a secret in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.sandbox.cells import CANARY_KEY, KERNEL_MEMORY_MB, SANDBOX_ON, SANDBOXED, Bob, cell_model
from tests.support.server import Server, server_errors, start_server


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox")


@pytest.fixture(scope="module")
def model(workdir: Path) -> str:
    return cell_model(workdir / "scenarios")


@pytest.fixture(scope="module")
def server(workdir: Path, model: str) -> Iterator[Server]:
    srv = start_server(workdir, model=model, env={**SANDBOXED, "ANTHROPIC_API_KEY": CANARY_KEY,
                                                  "TURNSTREAM_KERNEL_MEMORY_MB": str(KERNEL_MEMORY_MB)})
    try:
        # The attacks are real: unsandboxed, the kill attempt as root would hit the whole machine.
        assert any(SANDBOX_ON in line for line in srv.output), srv.output
        yield srv
    finally:
        srv.stop()
        assert server_errors(srv) == []


@pytest.fixture(scope="module")
def bob_key(server: Server, workdir: Path) -> str:
    return server.add_user("bob", workdir)


@pytest.fixture(scope="module")
def bob(server: Server, bob_key: str) -> Bob:
    return Bob(server, bob_key)
