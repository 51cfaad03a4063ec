"""The kernel's sandbox and limits, one kernel at a time: what a cell sees, what it leaves
behind, how a too-large output and a missing sandbox are reported, and the rlimits that hold
when no cgroup can be made."""

from __future__ import annotations

import ast
import errno
import os
from functools import partial

import anyio

from tests.support.processes import kernel_processes, living, parent, sandbox_processes, session, wait_for
from turnstream.errors import SandboxUnavailable
from turnstream.notebook import Kernel, KernelLimits, NotebookManager, SandboxConfig
from turnstream.notebook.launch import limits_note


async def test_a_cell_sees_a_private_working_directory_that_lasts_as_long_as_the_kernel() -> None:
    k = Kernel()
    try:
        r = await k.execute("import os\nopen('notes.txt', 'w').write('kept')\n(os.getcwd(), os.environ['HOME'])")
        assert r.outputs == [{"type": "text", "text": "('/home/notebook', '/home/notebook')"}]
        assert (await k.execute("open('notes.txt').read()")).outputs == [{"type": "text", "text": "'kept'"}]
        await k.execute("open('/tmp/scratch.txt', 'w').write('gone after a restart')")
        await k.restart()
        # A fresh kernel, fresh tmpfs mounts. /tmp holds only the mount points of the runtime when
        # the server's virtual environment lives under /tmp (a checkout there).
        r = await k.execute("import os, sys\n"
                            "os.listdir('.'), [n for n in os.listdir('/tmp')"
                            " if not any(p.startswith(f'/tmp/{n}/') for p in sys.path)]")
        assert r.outputs == [{"type": "text", "text": "([], [])"}]
    finally:
        await k.aclose()


async def test_processes_a_cell_started_end_with_the_cell() -> None:
    k = Kernel()
    try:
        r = await k.execute("import subprocess\nsleeper = subprocess.Popen(['sleep', '600'])\nsleeper.pid")
        pid = int(r.outputs[-1]["text"])  # type: ignore[typeddict-item]
        r = await k.execute(f"import os\ntry:\n    os.kill({pid}, 0)\n    state = 'alive'\n"
                            "except ProcessLookupError:\n    state = 'gone'\nstate")
        assert r.outputs == [{"type": "text", "text": "'gone'"}]
    finally:
        await k.aclose()


async def test_an_output_over_the_limit_is_refused_and_the_kernel_goes_on() -> None:
    k = Kernel(KernelLimits(output_bytes=200_000))
    try:
        await k.start()
        gen = k.generation
        r = await k.execute("import plotly.graph_objects as go\n"
                            "go.Figure(go.Scatter(x=list(range(50_000)), y=list(range(50_000))))")
        assert r.status == "error"
        err = r.outputs[-1]
        assert err["type"] == "error" and err["ename"] == "OutputTooLarge"
        assert "more than the 195 KiB a cell may return" in err["evalue"]
        assert (await k.execute("'still here'")).outputs == [{"type": "text", "text": "'still here'"}]
        assert k.generation == gen
    finally:
        await k.aclose()


async def test_without_bubblewrap_no_cell_runs_and_the_reason_is_given() -> None:
    sandbox = SandboxConfig(bwrap="/nonexistent/bwrap")
    manager = NotebookManager(sandbox=sandbox)
    try:
        cell = await manager.create_cell("s", "1 + 1")
        report = await manager.run_cell("s", cell.id)
        err = report.cell["outputs"][-1]
        assert (report.status, err["ename"]) == ("error", "SandboxUnavailable")
        assert "apt install bubblewrap" in err["evalue"]
        state = await manager.state("s")
        assert state["sandbox"]["mode"] == "unavailable" and state["sandbox"]["warning"] == err["evalue"]
        try:
            Kernel(sandbox=sandbox).check_start()
            raise AssertionError("a kernel started without bubblewrap")
        except SandboxUnavailable:
            pass
    finally:
        await manager.aclose()


async def test_without_cgroups_rlimits_still_bound_processes_and_memory() -> None:
    no_cgroups = SandboxConfig(cgroups=False)
    assert limits_note(no_cgroups) == "rlimits per process (cgroups turned off)"
    k = Kernel(KernelLimits(processes=40, memory_bytes=512 * 1024**2), sandbox=no_cgroups)
    try:
        r = await k.execute("import os, time\nn, err = 0, None\nwhile True:\n    try:\n        pid = os.fork()\n"
                            "    except OSError as e:\n        err = e.errno\n        break\n    if pid == 0:\n"
                            "        time.sleep(600)\n        os._exit(0)\n    n += 1\n(n, err)")
        forked, err = ast.literal_eval(r.outputs[-1]["text"])  # type: ignore[typeddict-item]
        assert err == errno.EAGAIN and forked < 40
        r = await k.execute("big = bytearray(1024**3)")
        assert r.outputs[-1]["type"] == "error" and r.outputs[-1]["ename"] == "MemoryError"
    finally:
        await k.aclose()


ESCAPE_AND_SPIN = ("import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n"
                   "            pass\n    os._exit(0)\nwhile True:\n    pass")


async def test_stopping_a_kernel_ends_its_whole_tree_with_no_cgroup_to_help() -> None:
    k = Kernel(sandbox=SandboxConfig(cgroups=False))  # only the PID namespace to rely on
    await k.start()
    me = os.getpid()

    def escaped() -> set[int]:
        # The escapee is out once the fork between it and the kernel has exited: it then has a
        # session of its own and a parent outside the kernel's processes (bubblewrap's init).
        kernels = kernel_processes(me)
        tops = {p for p in kernels if parent(p) not in kernels}
        return kernels if len(tops) >= 2 and len({session(p) for p in tops} - {None}) >= 2 else set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(k.execute, ESCAPE_AND_SPIN, time_limit=60))
        kernels = await anyio.to_thread.run_sync(wait_for, "the escapee", escaped)
        tree = sandbox_processes(me) | living(kernels)
        # The kernel and the escapee in a session of its own, and bubblewrap around them.
        assert len(living(kernels)) >= 2 and tree - kernels, tree
        tg.cancel_scope.cancel()  # the run is cancelled: its kernel is stopped
    await anyio.to_thread.run_sync(wait_for, "the whole tree to end", lambda: not living(tree))
    await k.aclose()
