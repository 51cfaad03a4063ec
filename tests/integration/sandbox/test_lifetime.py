"""How long kernels live, seen from the host's process table: a kernel's whole tree (a
``setsid`` double-fork escapee included) dies with its session, and with the server even after
``kill -9``; live kernels are capped (least recently used stopped first) and idle ones are
stopped, and their notebooks go on."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.integration.sandbox.cells import SANDBOX_ON, SANDBOXED, Notebook
from tests.support.processes import kernel_processes, living, sandbox_processes, wait_for
from tests.support.server import Server, run_turn, start_server

ESCAPE_AND_SPIN = """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            pass
    os._exit(0)
while True:
    pass
"""
"""A cell that leaves a grandchild in a session of its own, spinning, and spins itself."""


@contextmanager
def serving(workdir: Path, model: str, **env: str) -> Iterator[Server]:
    srv = start_server(workdir, model=model, env={**SANDBOXED, **env}, name="lifetime")
    try:
        assert any(SANDBOX_ON in line for line in srv.output), srv.output
        yield srv
    finally:
        srv.stop()


def _spin_in_background(notebook: Notebook) -> threading.Thread:
    """Send ESCAPE_AND_SPIN as a turn that never finishes by itself; the thread ends when the
    turn's stream does (its session deleted, or the server gone)."""
    def turn() -> None:
        try:
            with notebook.client() as c:
                run_turn(c, notebook.id, ESCAPE_AND_SPIN)
        except Exception:  # the server went away mid-stream: what the test wants
            pass

    thread = threading.Thread(target=turn, daemon=True)
    thread.start()
    return thread


def _escaped(server: Server, before: set[int]) -> set[int]:
    """Once the cell runs and its escapee has its own session: the new kernel processes."""
    new = kernel_processes(server.proc.pid) - before
    sessions = set()
    for pid in new:
        try:
            sessions.add(os.getsid(pid))
        except ProcessLookupError:
            continue
    return new if len(new) >= 2 and len(sessions) >= 2 else set()


def test_deleting_a_session_ends_its_kernel_tree_escapees_included(server: Server) -> None:
    notebook = Notebook(server)
    before = kernel_processes(server.proc.pid)
    boxed_before = sandbox_processes(server.proc.pid)
    thread = _spin_in_background(notebook)
    wait_for("the cell and its setsid escapee to run", lambda: _escaped(server, before))
    tree = sandbox_processes(server.proc.pid) - boxed_before  # bubblewrap's two, the kernel, the escapee
    assert len(tree) >= 4
    notebook.delete()
    wait_for("every process of the deleted session's kernel to end", lambda: not living(tree))
    thread.join(30)
    assert not thread.is_alive()
    assert server.proc.poll() is None


def test_kill_9_of_the_server_ends_every_kernel(tmp_path: Path, model: str) -> None:
    with serving(tmp_path, model) as srv:
        idle = Notebook(srv)
        assert idle.value("'idle kernel'") == "'idle kernel'"
        before = kernel_processes(srv.proc.pid)
        thread = _spin_in_background(Notebook(srv))
        wait_for("the cell and its setsid escapee to run", lambda: _escaped(srv, before))
        tree = sandbox_processes(srv.proc.pid)
        assert len(tree) >= 7  # two kernels in bubblewrap, and the escapee
        srv.proc.kill()
        srv.proc.wait(10)
        wait_for("every kernel process to end after kill -9 of the server", lambda: not living(tree))
        thread.join(30)


def test_the_kernel_cap_stops_the_least_recently_used_kernel(tmp_path: Path, model: str) -> None:
    with serving(tmp_path, model, TURNSTREAM_MAX_KERNELS="2") as srv:
        notebooks = [Notebook(srv) for _ in range(3)]
        first: dict[int, str] = {}
        kernels: dict[int, set[int]] = {}
        for i, nb in enumerate(notebooks):
            before = kernel_processes(srv.proc.pid)
            result = nb.run(f"base = {40 + i}\nbase")
            assert result["outputs"] == [{"type": "text", "text": str(40 + i)}]
            first[i] = result["cell_id"]
            kernels[i] = kernel_processes(srv.proc.pid) - before
            assert len(kernel_processes(srv.proc.pid)) <= 2
        assert not living(kernels[0]) and living(kernels[1]) and living(kernels[2])
        # The first notebook kept its cell and output; its next run starts a fresh kernel and
        # re-runs the cell it needs. The least recently used kernel (the second) makes room.
        state = notebooks[0].state()
        assert [(c["status"], c["stale"]) for c in state["cells"]] == [("success", True)]
        assert state["cells"][0]["outputs"] == [{"type": "text", "text": "40"}]
        again = notebooks[0].run("base + 2")
        assert again["ran_upstream"] == [first[0]]
        assert again["outputs"][-1]["text"] == "42"
        assert not living(kernels[1]) and living(kernels[2])
        assert len(kernel_processes(srv.proc.pid)) == 2


def test_idle_kernels_are_stopped_and_their_notebooks_go_on(tmp_path: Path, model: str) -> None:
    with serving(tmp_path, model, TURNSTREAM_KERNEL_IDLE_TIMEOUT="3") as srv:
        nb = Notebook(srv)
        result = nb.run("base = 41\nbase")
        assert result["outputs"] == [{"type": "text", "text": "41"}]
        kernel = kernel_processes(srv.proc.pid)
        assert len(kernel) == 1
        wait_for("the idle kernel to stop", lambda: not living(kernel))
        state = nb.state()
        assert state["cells"][0]["outputs"] == [{"type": "text", "text": "41"}]  # outputs are kept
        assert state["cells"][0]["stale"] is True
        again = nb.run("base + 1")
        assert again["ran_upstream"] == [result["cell_id"]]
        assert again["outputs"][-1]["text"] == "42"


def test_network_on_lets_cells_reach_the_host(tmp_path: Path, model: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        srv = start_server(tmp_path, model=model, env={**SANDBOXED, "TURNSTREAM_NOTEBOOK_NETWORK": "on"})
        try:
            assert any("bubblewrap sandbox (network on;" in line for line in srv.output), srv.output
            code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n'connected'"
            assert Notebook(srv).value(code) == "'connected'"
            listener.settimeout(5)
            listener.accept()[0].close()
        finally:
            srv.stop()
    finally:
        listener.close()
