"""The typed settings of notebook kernels, with their defaults documented here and nowhere else.

Nothing in ``turnstream.notebook`` reads the environment: the server builds these values
(``server/main.py``) and hands them to ``NotebookManager``; a library user builds them in code.

* ``KernelLimits``: what one kernel may use (time per cell, memory, processes, disk, output).
* ``SandboxConfig``: how kernels are isolated (bubblewrap, or explicitly none) and whether
  they may use the network.
* ``PoolLimits``: what all the kernels of one manager may use together (how many run at
  once, how long an idle one lives).
* ``FileLimits``: how large a notebook's data files may be, one and all together.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

MiB = 1024**2
GiB = 1024**3


@dataclass(frozen=True, slots=True)
class KernelLimits:
    """Limits for one notebook's kernel."""

    time_limit: float = 30.0
    """Seconds one cell may run before the kernel's whole process tree is killed and restarted."""
    memory_bytes: int | None = 2 * GiB
    """Memory of the kernel: the address-space limit of each of its processes (``RLIMIT_AS``,
    so a large allocation is a ``MemoryError``), and, where a cgroup can be made, of all its
    processes and the files in its working directory and ``/tmp`` together. ``None``: no limit."""
    processes: int = 256
    """Processes and threads the kernel may have at once (pids cgroup and ``RLIMIT_NPROC``)."""
    cpus: float = 1.0
    """CPU cores the kernel may keep busy (cgroup CPU quota); also the thread count numeric
    libraries and DuckDB are told to use."""
    workdir_bytes: int = 512 * MiB
    """Size of the kernel's working directory (a tmpfs: its files live as long as the kernel)."""
    tmp_bytes: int = 256 * MiB
    """Size of the kernel's private ``/tmp`` (and of ``/dev/shm``)."""
    output_bytes: int = 16 * MiB
    """Largest reply (all outputs of one cell, as JSON) the server reads from a kernel."""
    start_timeout: float = 30.0
    """Seconds to wait for a new kernel to say it is ready."""
    interrupt_grace: float = 2.0
    """Seconds an interrupted cell has to stop (a ``KeyboardInterrupt``) before the kernel is
    killed and restarted instead."""


@dataclass(frozen=True, slots=True)
class FileLimits:
    """Limits on a notebook's data files (uploads)."""

    file_bytes: int = 25 * MiB
    """Largest data file."""
    total_bytes: int = 100 * MiB
    """All the data files of one notebook together. They are also written into the kernel's
    working directory, so keep this well below ``KernelLimits.workdir_bytes``."""


SandboxMode = Literal["bubblewrap", "off"]


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How kernels are isolated from the server, the machine and each other (docs/security.md)."""

    mode: SandboxMode = "bubblewrap"
    """``"bubblewrap"``: every kernel runs in a bwrap sandbox, and when none can start no cell
    runs. ``"off"``: kernels are plain subprocesses that can read whatever the server's user
    can; only for machines where no sandbox can run, and never with more than one user."""
    network: bool = False
    """Let kernels use the network (the host's network namespace, DNS and CA certificates)."""
    bwrap: str | None = None
    """The bubblewrap binary; ``None`` looks for ``bwrap`` on the PATH."""
    cgroups: bool = True
    """Put each kernel in its own cgroup when one can be made (memory, pids, CPU for the whole
    process tree); otherwise, or when False, limits fall back to per-process rlimits."""
    uid_base: int = 1_500_000_000
    """When the server runs as root, each kernel runs as its own unprivileged host user,
    ``uid_base`` plus a number below 65,536 (never a real account: the range is far above the
    ids that systems and container tools hand out)."""


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """Limits on all the kernels of one ``NotebookManager`` (one server process) together."""

    max_kernels: int | None = None
    """Kernels alive at once. When a notebook needs a kernel and this many are alive, the one
    used least recently (and not running a cell) is stopped first. ``None``: sized for the
    machine by ``default_max_kernels``."""
    idle_timeout: float | None = 900.0
    """Seconds a kernel may sit unused before it is stopped. ``None``: never."""


def default_max_kernels(memory_bytes: int | None) -> int:
    """How many kernels this machine can hold: three quarters of its RAM divided by one
    kernel's memory limit, at least 2 (with no memory limit: one per 2 GiB)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 * GiB
    return max(2, int(ram * 3 // 4) // (memory_bytes or 2 * GiB))
