"""Start one kernel's process tree, and stop all of it.

``launch()`` returns a ``KernelProcess``: the child (``child.py``) behind bubblewrap, or bare
when the sandbox is off, in its own cgroup when one can be made, with pipes for the protocol
(stdin/stdout) and for start-up errors (stderr).

How the whole tree dies:

* ``KernelProcess.kill()``: SIGKILL to the launcher's process group; bubblewrap's
  ``--die-with-parent`` then kills the sandbox's init, and when a PID namespace's init dies
  the kernel kills every process in it, ``setsid`` and double-fork escapees included. The
  cgroup, when there is one, is killed and removed as well.
* The server dies (``kill -9`` included): bubblewrap asked for SIGKILL when its parent goes
  (``PR_SET_PDEATHSIG``), and the rest follows as above.

``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child exits, not the process.
Worker threads come and go (an executor may retire idle ones), so every kernel is forked by one
long-lived spawner thread that lasts as long as the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import SandboxUnavailable
from .cgroups import KernelGroup, open_cgroups
from .config import KernelLimits, SandboxConfig
from .sandbox import build_command, closed_to_others, find_bwrap, find_runtime

SCRIPT_DIR = Path(__file__).parent
CHILD_ENV_KEYS = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP",
                  "SYSTEMROOT")
"""The only environment variables an unsandboxed kernel inherits."""
JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
"""The launcher: join every group named before ``--``, then become the command after it."""
LAUNCH_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
UID_SPAN = 65_536

_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _spawn(argv: Sequence[str], *, cwd: str | None, env: dict[str, str],
           pass_fds: Sequence[int] = ()) -> subprocess.Popen[bytes]:
    """``Popen`` on the spawner thread (see the module docstring), with pipes for all three
    standard streams and a session of its own."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnstream-kernel-spawner")

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                bufsize=0, cwd=cwd, env=env, start_new_session=True, pass_fds=pass_fds)

    return _spawner.submit(popen).result()


class _Uids:
    """Host uids for kernels of a root server: one per live kernel, handed out round-robin
    from a random start (so two servers on one machine rarely share one)."""

    def __init__(self, base: int) -> None:
        self.base = base
        self._next = secrets.randbelow(UID_SPAN)
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            for _ in range(UID_SPAN):
                uid = self.base + self._next
                self._next = (self._next + 1) % UID_SPAN
                if uid not in self._used:
                    self._used.add(uid)
                    return uid
        raise SandboxUnavailable("no free kernel uid left")

    def give(self, uid: int) -> None:
        with self._lock:
            self._used.discard(uid)


_uids: dict[int, _Uids] = {}


def _uid_pool(base: int) -> _Uids:
    with _spawner_lock:
        return _uids.setdefault(base, _Uids(base))


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in CHILD_ENV_KEYS}


class KernelProcess:
    """A started kernel: its launcher process, its group, its uid."""

    def __init__(self, proc: subprocess.Popen[bytes], group: KernelGroup | None, uid: int | None,
                 uids: _Uids | None) -> None:
        self.proc = proc
        self.group = group
        self._uid = uid
        self._uids = uids
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self, limit: int = 4000) -> str:
        """What the launcher, bubblewrap or the child wrote to stderr so far (never blocks)."""
        stream = self.proc.stderr
        if stream is None:
            return ""
        chunks: list[bytes] = []
        with contextlib.suppress(OSError, ValueError):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            while sum(map(len, chunks)) < limit:
                try:
                    chunk = os.read(fd, limit)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")[-limit:].strip()

    def kill(self) -> int | None:
        """Kill the whole tree, reap the launcher, remove the group. Safe to call twice."""
        if self.proc.returncode is None:  # not reaped yet, so the group id is still ours
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        with self._lock:
            if self._stopped:
                return code
            self._stopped = True
        if self.group is not None:
            self.group.remove()
        if self._uids is not None and self._uid is not None:
            self._uids.give(self._uid)
        if self.proc.stderr is not None:
            with contextlib.suppress(OSError):
                self.proc.stderr.close()
        return code


def limits_note(config: SandboxConfig) -> str:
    """What enforces the limits of kernels started with ``config`` (for the start-up log)."""
    if not config.cgroups:
        return "rlimits per process (cgroups turned off)"
    groups = open_cgroups()
    if isinstance(groups, str):
        return f"rlimits per process (no cgroup: {groups})"
    return groups.describe()


def launch(limits: KernelLimits, config: SandboxConfig, *, python: str = sys.executable,
           cwd: str | None = None) -> KernelProcess:
    """Start a kernel. Raises SandboxUnavailable when the sandbox cannot be set up here, and
    OSError when the process or its cgroup cannot be made."""
    if config.mode == "off":
        group = _group(limits, config)
        argv = [*_joiner(group), python, "-I", str(SCRIPT_DIR / "child.py"),
                json.dumps(child_config(limits, sandboxed=False, uid=None, site=()))]
        try:
            return KernelProcess(_spawn(argv, cwd=cwd, env=child_env()), group, None, None)
        except BaseException:
            if group is not None:
                group.remove(timeout=0.5)
            raise
    bwrap = find_bwrap(config)
    if bwrap is None:
        raise SandboxUnavailable(BWRAP_MISSING)
    try:
        runtime = find_runtime(python)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxUnavailable(f"No notebook cell can run: cannot inspect the kernel's Python {python} "
                                 f"({exc}).") from exc
    if os.geteuid() == 0 and (closed := closed_to_others(runtime, SCRIPT_DIR)) is not None:
        raise SandboxUnavailable(
            f"No notebook cell can run: each kernel runs as a user of its own, and {closed} is not readable "
            "by other users. Make the Python installation, its packages and turnstream readable by all "
            f"(for example `chmod -R a+rX {os.path.dirname(closed)}`), then restart the server.")
    uids = _uid_pool(config.uid_base) if os.geteuid() == 0 else None
    uid = uids.take() if uids is not None else None
    group = None
    fds: list[int] = []
    try:
        group = _group(limits, config)
        child = child_config(limits, sandboxed=True, uid=uid, site=runtime.site)
        command = build_command(bwrap=bwrap, runtime=runtime, config=config, limits=limits,
                                child_args=[json.dumps(child)], uid=uid, script_dir=SCRIPT_DIR)
        for index, data in command.data:
            r, w = os.pipe()
            fds.append(r)
            os.write(w, data)  # small (less than a pipe's buffer), so this never blocks
            os.close(w)
            command.argv[index] = str(r)
        proc = _spawn([*_joiner(group), *command.argv], cwd="/", env=LAUNCH_ENV, pass_fds=fds)
    except BaseException:
        if group is not None:
            group.remove(timeout=0.5)
        if uids is not None and uid is not None:
            uids.give(uid)
        raise
    finally:
        for fd in fds:
            os.close(fd)
    return KernelProcess(proc, group, uid, uids)


def _group(limits: KernelLimits, config: SandboxConfig) -> KernelGroup | None:
    if not config.cgroups:
        return None
    groups = open_cgroups()
    return None if isinstance(groups, str) else groups.create(limits)


def _joiner(group: KernelGroup | None) -> list[str]:
    return ["/bin/sh", "-c", JOIN_CGROUPS, "kernel-launcher", *group.procs_files, "--"] if group else []


def child_config(limits: KernelLimits, *, sandboxed: bool, uid: int | None,
                 site: Sequence[str]) -> dict[str, object]:
    """What ``child.py`` sets up before it says ready (its one argument, as JSON)."""
    return {"memory": limits.memory_bytes, "processes": limits.processes, "uid": uid,
            "site": list(site), "reap": sandboxed, "output_bytes": limits.output_bytes,
            "threads": max(1, round(limits.cpus))}


BWRAP_MISSING = (
    "No notebook cell can run: bubblewrap (bwrap), the sandbox every kernel runs in, is not installed. "
    "Install it with `apt install bubblewrap` (`make serve` does it for you) and restart the server. "
    "To run cells without any isolation instead, set TURNSTREAM_NOTEBOOK_SANDBOX=off, and only on a "
    "machine where you are the only user.")


def explain_failure(stderr: str, config: SandboxConfig) -> SandboxUnavailable | None:
    """A start-up failure that is the sandbox's, in words a user can act on; None otherwise."""
    if config.mode == "off" or "bwrap:" not in stderr:
        return None
    said = next((line for line in stderr.splitlines() if line.startswith("bwrap:")), stderr).strip()
    if any(s in said for s in ("Unknown option", "Unknown action")):
        return SandboxUnavailable(
            f"No notebook cell can run: this bubblewrap is too old for the sandbox ({said}). Install "
            "bubblewrap 0.6 or later (Debian 12, Ubuntu 22.04 and newer have it) and restart the server.")
    if any(s in said for s in ("namespace", "uid map", "setting up uid", "Operation not permitted",
                               "Permission denied")):
        return SandboxUnavailable(
            f"No notebook cell can run: bubblewrap could not set up the sandbox ({said}). When the server "
            "does not run as root, bubblewrap needs unprivileged user namespaces: allow them "
            "(`sysctl -w kernel.unprivileged_userns_clone=1` on older Debian; on Ubuntu 24.04 and later, "
            "an AppArmor profile that lets bwrap use them), or run the server as root. In a container, "
            "give it the right to make namespaces.")
    return SandboxUnavailable(f"No notebook cell can run: the sandbox did not start ({said}).")
