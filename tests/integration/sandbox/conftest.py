"""A real ``turnstream serve`` (SQLite, the default notebook toolset, bubblewrap sandbox) with
two users: alice (the server's own key) attacks, bob keeps a kernel with a secret in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.sandbox.cells import Notebook, cell_model
from tests.support.server import Server, server_errors, start_server

CANARY_KEY = "sk-ant-canary-5f0c2b9d"
"""A provider key in the server's environment that no cell may read."""
BOB_SECRET = "bob-secret-7c1e44"
"""What bob keeps in his kernel and his working directory, and says in his conversation."""
KERNEL_MEMORY_MB = 1024
SANDBOXED = {"TURNSTREAM_NOTEBOOK_SANDBOX": "on", "TURNSTREAM_NOTEBOOK_NETWORK": "off"}
"""Whatever the environment running the tests says."""
SANDBOX_ON = "Notebook cells run in a bubblewrap sandbox (no network; limits by "
"""What the server prints at start when kernels are sandboxed."""


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


class Bob:
    """Bob's notebook: a kernel holding a secret, checked after every attack."""

    def __init__(self, server: Server, key: str) -> None:
        self.notebook = Notebook(server, key)
        value = self.notebook.value(f"secret = {BOB_SECRET!r}\nopen('bob.txt', 'w').write(secret)\nsecret")
        assert value == repr(BOB_SECRET)

    def assert_intact(self) -> None:
        """Bob's kernel is the same one (nothing re-ran) and still holds his variable and file."""
        result = self.notebook.run("(secret, open('bob.txt').read())")
        assert result["status"] == "success", result
        assert result["ran_upstream"] == []
        assert result["outputs"][-1]["text"] == repr((BOB_SECRET, BOB_SECRET))


@pytest.fixture(scope="module")
def bob(server: Server, bob_key: str) -> Bob:
    return Bob(server, bob_key)
