"""One cgroup per kernel: memory, process count and CPU for its whole process tree.

rlimits bound each process on its own (a kernel that forks ten children may use ten times
its memory); a cgroup bounds the tree, counts the files in its tmpfs mounts as memory, and
can kill everything in it at once. So kernels get one when the server can make one:

* **cgroup v1** (hybrid or legacy hierarchies, e.g. a root server on Debian with v1 mounted):
  a group in each of the ``memory``, ``pids`` and (when mounted) ``cpu`` hierarchies, under
  the server's own group there: ``<own>/turnstream-<server pid>/<kernel>``.
* **cgroup v2**, where the server's own group is writable (delegated: a systemd service, or
  ``systemd-run --user --scope -p Delegate=yes turnstream serve``) and offers ``memory`` and
  ``pids``: the server moves itself into a leaf ``<own>/turnstream-server`` (v2 lets a group
  hand resources to children only when it holds no process itself), then kernels live in
  ``<own>/turnstream-kernels-<server pid>/<kernel>``.

Otherwise ``open_cgroups()`` says why not, and limits fall back to rlimits (``child.py``).
A kernel process joins its group before it starts anything: the launcher is
``sh -c 'echo $$ > <group>/cgroup.procs; exec bwrap …'`` (``launch.py``).

Groups left by a server that was killed are removed at the next start (``turnstream-<pid>``
with a dead pid); kernels in them died with that server (bubblewrap ``--die-with-parent``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .config import KernelLimits

log = logging.getLogger(__name__)

CPU_PERIOD_US = 100_000
V1_CPU_SHARES = 256
"""A kernel's weight against the server's own threads (the default is 1024): when CPUs are
contended, the server is served first."""
V2_CPU_WEIGHT = 25
EXTRA_TASKS = 4
"""Tasks a kernel's group holds besides the kernel's own: the launcher and bubblewrap's two."""


@dataclass(frozen=True, slots=True)
class _Mount:
    root: str
    point: str
    fstype: str
    options: frozenset[str]


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _mounts() -> list[_Mount]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
                continue
            out.append(_Mount(_unescape(fields[3]), _unescape(fields[4]), tail[0], frozenset(tail[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """Controller name (``""`` for v2) -> this process's group path."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _join(mount: _Mount, path: str) -> Path:
    rel = path[len(mount.root):] if mount.root != "/" and path.startswith(mount.root) else path
    return Path(mount.point) / rel.lstrip("/")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class KernelGroup:
    """One kernel's group (a directory per v1 hierarchy, or one v2 directory)."""

    def __init__(self, dirs: list[Path], version: int) -> None:
        self.dirs = dirs
        self.version = version

    @property
    def procs_files(self) -> list[str]:
        """Where a process writes its pid to join the group."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return found

    def oom_kills(self) -> int:
        """How many processes the kernel's memory limit has killed."""
        for d in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError, ValueError):
                    for line in (d / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
        return 0

    def kill(self) -> None:
        """SIGKILL every process in the group."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs[0] / "cgroup.kill", "1")
                return
        for pid in self.pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def remove(self, timeout: float = 3.0) -> bool:
        """Kill what is left and remove the directories; False if they outlived ``timeout``."""
        deadline = time.monotonic() + timeout
        left = list(self.dirs)
        while True:
            self.kill()
            for d in list(left):
                try:
                    d.rmdir()
                    left.remove(d)
                except FileNotFoundError:
                    left.remove(d)
                except OSError:
                    pass
            if not left:
                return True
            if time.monotonic() >= deadline:
                log.warning("kernel cgroup %s is still busy; it is removed when the server next starts", left)
                return False
            time.sleep(0.02)  # memory charges and dying processes leave the group asynchronously


class Cgroups:
    """Where this server process makes its kernels' groups."""

    def __init__(self, version: int, parents: dict[str, Path]) -> None:
        self.version = version
        self.parents = parents
        """Controller (v1) or ``""`` (v2) -> the directory kernel groups are made in."""
        self._n = 0

    def describe(self) -> str:
        names = "memory, pids" + (", cpu" if "cpu" in self.parents or self._v2_has("cpu") else "")
        return f"cgroup v{self.version} ({names})"

    def _v2_has(self, controller: str) -> bool:
        if self.version != 2:
            return False
        with contextlib.suppress(OSError):
            return controller in (self.parents[""] / "cgroup.subtree_control").read_text().replace("+", " ").split()
        return False

    def create(self, limits: KernelLimits) -> KernelGroup:
        """A new group with ``limits``. Raises OSError when it cannot be made."""
        self._n += 1
        name = f"k{self._n}-{os.urandom(3).hex()}"
        dirs: list[Path] = []
        try:
            for controller, parent in self.parents.items():
                d = parent / name
                d.mkdir()
                dirs.append(d)
                self._limit(controller, d, limits)
        except OSError:
            KernelGroup(dirs, self.version).remove(timeout=0.5)
            raise
        return KernelGroup(dirs, self.version)

    def _limit(self, controller: str, d: Path, limits: KernelLimits) -> None:
        tasks = str(limits.processes + EXTRA_TASKS)
        quota = str(max(1000, int(limits.cpus * CPU_PERIOD_US)))
        if self.version == 1:
            if controller == "memory" and limits.memory_bytes:
                _write(d / "memory.limit_in_bytes", str(limits.memory_bytes))
                with contextlib.suppress(OSError):  # no swap accounting on this kernel: nothing to cap
                    _write(d / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
            elif controller == "pids":
                _write(d / "pids.max", tasks)
            elif controller == "cpu":
                _write(d / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _write(d / "cpu.cfs_quota_us", quota)
                _write(d / "cpu.shares", str(V1_CPU_SHARES))
            return
        if limits.memory_bytes:
            _write(d / "memory.max", str(limits.memory_bytes))
            with contextlib.suppress(OSError):
                _write(d / "memory.swap.max", "0")
        _write(d / "pids.max", tasks)
        if self._v2_has("cpu"):
            _write(d / "cpu.max", f"{quota} {CPU_PERIOD_US}")
            _write(d / "cpu.weight", str(V2_CPU_WEIGHT))

    def close(self) -> None:
        """Remove what is left (at exit, kernels have died with the spawner thread)."""
        for parent in self.parents.values():
            with contextlib.suppress(OSError):
                for d in parent.iterdir():
                    if d.is_dir():
                        KernelGroup([d], self.version).remove(timeout=1.0)
            with contextlib.suppress(OSError):
                parent.rmdir()


def _sweep(parent_of: Path, prefix: str) -> None:
    """Remove groups left by servers that are gone (``<prefix><pid>``, pid dead)."""
    with contextlib.suppress(OSError):
        for d in parent_of.iterdir():
            tail = d.name[len(prefix):]
            if not d.name.startswith(prefix) or not tail.isdigit() or _pid_alive(int(tail)):
                continue
            for child in d.iterdir():
                if child.is_dir():
                    KernelGroup([child], 1).remove(timeout=0.2)
            with contextlib.suppress(OSError):
                d.rmdir()


def _open_v1(mounts: list[_Mount], own: dict[str, str]) -> Cgroups | str:
    parents: dict[str, Path] = {}
    for controller in ("memory", "pids", "cpu"):
        mount = next((m for m in mounts if m.fstype == "cgroup" and controller in m.options), None)
        if mount is None or controller not in own:
            if controller == "cpu":
                continue
            return f"no cgroup v1 {controller} hierarchy"
        base = _join(mount, own[controller])
        if not os.access(base, os.W_OK):
            if controller == "cpu":
                continue
            return f"cgroup v1 {controller} group {base} is not writable by this user"
        _sweep(base, "turnstream-")
        parent = base / f"turnstream-{os.getpid()}"
        try:
            parent.mkdir(exist_ok=True)
        except OSError as exc:
            if controller == "cpu":
                continue
            return f"cannot make {parent}: {exc.strerror}"
        parents[controller] = parent
    return Cgroups(1, parents)


def _open_v2(mounts: list[_Mount], own: dict[str, str]) -> Cgroups | str:
    mount = next((m for m in mounts if m.fstype == "cgroup2"), None)
    if mount is None or "" not in own:
        return "no cgroup v2 hierarchy"
    base = _join(mount, own[""])
    try:
        available = (base / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return f"cannot read {base}/cgroup.controllers: {exc.strerror}"
    missing = [c for c in ("memory", "pids") if c not in available]
    if missing:
        return f"cgroup v2 group {base} does not offer {', '.join(missing)}"
    if not os.access(base, os.W_OK) or not os.access(base / "cgroup.subtree_control", os.W_OK):
        return (f"cgroup v2 group {base} is not delegated to this user (run the server as a systemd "
                "service, or under `systemd-run --user --scope -p Delegate=yes`)")
    wanted = " ".join(f"+{c}" for c in ("memory", "pids", "cpu") if c in available)
    try:
        _enable(base, wanted)
    except OSError as exc:
        return f"cannot hand memory and pids to sub-groups of {base}: {exc.strerror}"
    _sweep(base, "turnstream-kernels-")
    parent = base / f"turnstream-kernels-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
        _write(parent / "cgroup.subtree_control", wanted)
    except OSError as exc:
        return f"cannot make {parent}: {exc.strerror}"
    return Cgroups(2, {"": parent})


def _enable(base: Path, wanted: str) -> None:
    """Enable controllers for ``base``'s children, first moving this process into a leaf of
    its own if ``base`` holds processes (v2's rule: no processes in a group that hands out
    resources)."""
    try:
        _write(base / "cgroup.subtree_control", wanted)
        return
    except OSError:
        pass
    leaf = base / "turnstream-server"
    leaf.mkdir(exist_ok=True)
    _write(leaf / "cgroup.procs", str(os.getpid()))
    _write(base / "cgroup.subtree_control", wanted)


@functools.cache
def open_cgroups() -> Cgroups | str:
    """This process's cgroups for kernels, or why there are none (made once per process)."""
    try:
        mounts, own = _mounts(), _own_paths()
    except OSError as exc:
        return f"cannot read this process's cgroups: {exc.strerror}"
    v2 = _open_v2(mounts, own) if any(m.fstype == "cgroup2" for m in mounts) else "no cgroup v2 hierarchy"
    found = v2 if isinstance(v2, Cgroups) else _open_v1(mounts, own)
    if isinstance(found, str):
        return f"{found}; {v2}"
    atexit.register(found.close)
    return found
