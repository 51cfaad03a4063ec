"""The sandbox as an unprivileged server meets it (``turnstream serve`` as a normal user):
bubblewrap makes a user namespace, no cgroup is writable, so rlimits hold the limits.

Run as root (CI), the server-side script below runs as ``nobody`` through ``setpriv``; run as a
normal user, it runs as that user. It needs a Python that user can execute, of this Python's
version (the project's compiled dependencies come from this virtual environment)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig

from tests.support.paths import REPO

SCRIPT = r'''
import anyio, json, os
from tests.support.processes import kernel_processes, living, sandbox_processes, wait_for
from turnstream.notebook import Kernel, KernelLimits, SandboxConfig
from turnstream.notebook.launch import limits_note

BOMB = ("import os, time\nn, err = 0, None\nwhile True:\n    try:\n        pid = os.fork()\n"
        "    except OSError as e:\n        err = e.errno\n        break\n    if pid == 0:\n"
        "        time.sleep(600)\n        os._exit(0)\n    n += 1\n(n, err)")
SPIN = ("import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n"
        "            pass\n    os._exit(0)\nwhile True:\n    pass")
CELLS = {
    "who": "import os\nos.getuid(), os.getgid()",
    "bomb": BOMB,
    "userns": "import subprocess\nsubprocess.run(['unshare', '-U', 'true'], capture_output=True).returncode",
    "root": "import os\nos.access('/', os.W_OK) or os.access('/usr', os.W_OK)",
    "net": "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 22), timeout=2)\n    n = 'connected'\n"
           "except OSError as e:\n    n = type(e).__name__\nn",
    "memory": "try:\n    b = bytearray(1024**3)\n    m = 'allocated'\nexcept MemoryError:\n"
              "    m = 'MemoryError'\nm",
}

async def main():
    out = {"uid": os.getuid(), "limits": limits_note(SandboxConfig())}
    k = Kernel(KernelLimits(processes=32, memory_bytes=512 * 1024**2))
    for name, code in CELLS.items():
        r = await k.execute(code)
        out[name] = r.outputs[-1].get("text") if r.outputs else None
    me = os.getpid()
    out["host_uids"] = sorted({os.stat(f"/proc/{p}").st_uid for p in sandbox_processes(me)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(k.execute, SPIN)
        await anyio.to_thread.run_sync(
            wait_for, "the escapee", lambda: len({os.getsid(p) for p in kernel_processes(me)}) >= 2)
        tree = sandbox_processes(me)
        tg.cancel_scope.cancel()
    await anyio.to_thread.run_sync(wait_for, "the tree to end", lambda: not living(tree))
    out["tree"] = len(tree)
    await k.aclose()
    print(json.dumps(out))

anyio.run(main)
'''


def _python_for_others() -> str:
    """An interpreter of this version that a user other than root can run."""
    if os.geteuid() != 0:
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for cand in (f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if os.access(cand, os.X_OK) and (os.stat(cand).st_mode & 0o001):
            return cand
    raise AssertionError(f"this test needs {version} at /usr/bin or /usr/local/bin, runnable by nobody "
                         "(apt install python3), to run a server as an unprivileged user")


def _as_nobody() -> list[str]:
    """The command prefix that runs the script as nobody, with the checkout in view: when a
    parent directory of the checkout is closed to other users (a checkout under /root), an
    outer bubblewrap puts an open directory in its place with the checkout bound back in."""
    setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    closed = next((p for p in [*reversed(REPO.parents), REPO] if not os.stat(p).st_mode & 0o001), None)
    if closed is None:
        return setpriv
    assert closed != REPO, f"the checkout {REPO} itself is closed to other users (chmod o+rx it)"
    between = [str(p) for p in reversed(REPO.parents) if p.is_relative_to(closed) and p != closed]
    return ["bwrap", "--dev-bind", "/", "/", "--perms", "0755", "--tmpfs", str(closed),
            *[a for d in between for a in ("--dir", d)], "--bind", str(REPO), str(REPO), "--", *setpriv]


def test_an_unprivileged_server_sandboxes_its_kernels_with_a_user_namespace_and_rlimits() -> None:
    python = _python_for_others()
    site = sysconfig.get_paths()["purelib"]
    env = {"HOME": "/tmp", "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO}:{site}"}
    prefix = _as_nobody() if os.geteuid() == 0 else []
    proc = subprocess.run([*prefix, python, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          cwd="/", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    uid = out["uid"]
    assert uid != 0
    assert out["limits"].startswith("rlimits per process (no cgroup:")
    assert ast.literal_eval(out["who"]) == (uid, uid)
    assert out["host_uids"] == [uid]  # bubblewrap and the kernel: the server's own user, never root
    forked, err = ast.literal_eval(out["bomb"])
    assert err == 11 and forked < 32  # RLIMIT_NPROC counts the sandbox's user namespace only
    assert out["userns"] != "0"  # no user namespace inside the sandbox
    assert out["root"] == "False"
    assert out["net"] == "'ConnectionRefusedError'"  # its own loopback, nothing listening
    assert out["memory"] == "'MemoryError'"
    assert out["tree"] >= 4  # bubblewrap's two, the kernel and its escapee: all ended
