"""The bubblewrap command a kernel runs in: namespaces, a filesystem built from nothing, an
explicit environment. What it protects and what it does not: docs/security.md.

The sandbox's filesystem starts empty and shows, in this order:

* ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin`` links or directories beside it), read-only:
  the shared libraries and tools Python and the compiled packages need. It holds no user data.
* the interpreter, its standard library and the site-packages cells import from, read-only,
  at their own paths (a virtual environment inside the project shows only its site-packages;
  the base interpreter's own site-packages is hidden behind an empty directory), and the
  kernel's two scripts at ``/opt/turnstream``;
* ``/etc`` with only ``ld.so.cache`` and ``localtime`` from the host and a generated
  ``passwd``, ``group`` and ``hosts`` (the host's name service files and certificates too
  when the network is on);
* a fresh ``/proc`` for the sandbox's own PID namespace, a minimal ``/dev``;
* size-capped tmpfs mounts: the working directory ``/home/notebook`` (also ``$HOME``),
  ``/tmp`` and ``/dev/shm``; then ``/`` itself is made read-only.

A seccomp filter (``seccomp.py``) refuses the system calls that open most of the Linux
kernel's attack surface to an unprivileged process (new namespaces, mounts, bpf, io_uring…).

Not there: the database and its directory, the key file, the project and home directories,
other notebooks, the host's processes, the server's environment.

When the server runs as root, bubblewrap runs privileged (no user namespace) and the kernel
drops to its own unprivileged host uid before any cell runs (``child.py``), keeping only
``CAP_SETUID``/``CAP_SETGID`` until then. Otherwise bubblewrap makes a user namespace and,
where it can, forbids the sandbox from making more (``--disable-userns``).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import seccomp
from .config import KernelLimits, SandboxConfig

KERNEL_DIR = "/opt/turnstream"
"""Where the kernel's scripts (child.py, sqltext.py, files.py) appear inside the sandbox."""
HOME = "/home/notebook"
"""The kernel's working directory and $HOME inside the sandbox."""
SCRIPTS = ("child.py", "sqltext.py", "files.py")
HOST_DIRS = ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
NETWORK_ETC = ("resolv.conf", "hosts", "nsswitch.conf", "gai.conf", "host.conf", "ssl", "ca-certificates",
               "pki", "crypto-policies")

_QUERY = """\
import json, os, sys, sysconfig
base = [p for p in sys.path if os.path.isdir(p)]
import site
site.main()  # with -S, only this finds a virtual environment (sys.prefix)
lib = None
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    cand = os.path.join(sysconfig.get_config_var("LIBDIR") or "", name or "")
    lib = os.path.realpath(cand) if name and os.path.isfile(cand) else None
print(json.dumps({"executable": os.path.realpath(sys.executable), "base": base,
                  "site": [p for p in site.getsitepackages() if os.path.isdir(p)],
                  "base_site": site.getsitepackages([sys.base_prefix]), "lib": lib}))
"""


@dataclass(frozen=True, slots=True)
class Runtime:
    """The Python a kernel runs, as paths that must show (read-only) inside the sandbox."""

    executable: str
    """The interpreter binary itself (symlinks resolved)."""
    stdlib: tuple[str, ...]
    """The interpreter's own ``sys.path`` without site (standard library, lib-dynload)."""
    site: tuple[str, ...]
    """The site-packages directories cells import from (the virtual environment's)."""
    hidden: tuple[str, ...]
    """Site-packages of the base interpreter that lie inside ``stdlib`` but are not ``site``."""
    libpython: str | None
    """The shared libpython, when the interpreter is built with one."""


@functools.cache
def find_runtime(python: str) -> Runtime:
    """Ask ``python`` where its parts are (``-S``, so its path without site comes first)."""
    out = subprocess.run([python, "-I", "-S", "-c", _QUERY], capture_output=True, text=True, timeout=30,
                         check=True, env={"PATH": "/usr/bin:/bin"})
    info = json.loads(out.stdout)
    stdlib = tuple(info["base"])
    site = tuple(info["site"])
    hidden = tuple(p for p in info["base_site"]
                   if p not in site and os.path.isdir(p) and any(_under(p, d) for d in stdlib))
    return Runtime(info["executable"], stdlib, site, hidden, info["lib"])


@functools.cache
def bwrap_features(bwrap: str) -> frozenset[str]:
    """The options this bubblewrap knows, from its ``--help``."""
    try:
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except OSError:
        return frozenset()
    return frozenset(word for word in (out.stdout + out.stderr).split() if word.startswith("--"))


def closed_to_others(runtime: Runtime, script_dir: Path) -> str | None:
    """The first path a kernel running as another user could not read, or None. (Only the
    paths themselves: bubblewrap, run as root, binds them past closed parent directories.)"""
    files = [runtime.executable, runtime.libpython, *(str(script_dir / name) for name in SCRIPTS)]
    dirs = [*runtime.stdlib, *runtime.site]
    for path, need in [*((f, 0o004) for f in files if f), *((d, 0o005) for d in dirs)]:
        try:
            if os.stat(path).st_mode & need != need:
                return path
        except OSError:
            return path
    return None


def find_bwrap(config: SandboxConfig) -> str | None:
    """The bubblewrap binary to run (``config.bwrap``, else ``bwrap`` on the PATH), or None."""
    if config.bwrap:
        return config.bwrap if os.access(config.bwrap, os.X_OK) else None
    return shutil.which("bwrap")


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@dataclass(slots=True)
class SandboxCommand:
    """One kernel's bwrap command line and the data it reads from inherited pipes."""

    argv: list[str]
    data: list[tuple[int, bytes]]
    """For each ``--ro-bind-data``: the index in ``argv`` where the pipe's fd number goes, and
    the bytes to write into that pipe."""


class _Builder:
    """Collects bwrap arguments. Every parent directory of a mount point is made explicitly
    with mode 0755 (bwrap 0.8 run as root makes implicit parents 0700, which the kernel's uid
    could not cross); nothing is made inside a directory that is already a read-only bind."""

    def __init__(self) -> None:
        self.args: list[str] = []
        self.dirs: set[str] = {"/"}
        self.binds: list[str] = []
        self.data: list[tuple[int, bytes]] = []

    def parents(self, path: str) -> None:
        parts = Path(path).parent.parts
        for i in range(2, len(parts) + 1):
            d = "/" + "/".join(parts[1:i])
            if any(_under(d, b) for b in self.binds):
                return
            if d not in self.dirs:
                self.dirs.add(d)
                self.args += ["--dir", d]

    def dir(self, path: str) -> None:
        self.parents(path + "/x")

    def ro_bind(self, src: str, dest: str | None = None, *, try_: bool = False) -> None:
        dest = dest or src
        self.parents(dest)
        self.args += ["--ro-bind-try" if try_ else "--ro-bind", src, dest]
        self.binds.append(dest)

    def file(self, dest: str, content: str) -> None:
        """``dest`` with ``content``, read from a pipe (its fd is filled in at launch), readable by
        all (bwrap's default, 0600, hides ``/etc/passwd`` from a kernel that runs as another uid)."""
        self.parents(dest)
        self.args += ["--perms", "0444", "--ro-bind-data", "FD", dest]
        self.data.append((len(self.args) - 2, content.encode()))

    def seccomp(self, program: bytes) -> None:
        self.args += ["--seccomp", "FD"]
        self.data.append((len(self.args) - 1, program))

    def tmpfs(self, dest: str, size: int, perms: str = "1777") -> None:
        self.parents(dest)
        self.args += ["--perms", perms, "--size", str(size), "--tmpfs", dest]
        self.dirs.add(dest)


def build_command(*, bwrap: str, runtime: Runtime, config: SandboxConfig, limits: KernelLimits,
                  child_args: list[str], uid: int | None, script_dir: Path) -> SandboxCommand:
    """The bwrap command that runs ``child.py`` with ``child_args``. ``uid`` is the host uid
    the kernel drops to (the server runs as root) or None (bwrap makes a user namespace)."""
    features = bwrap_features(bwrap)
    b = _Builder()
    b.args += ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--hostname", "notebook"]
    if not config.network:
        b.args.append("--unshare-net")
    if uid is None:
        b.args.append("--unshare-user")
        if "--disable-userns" in features:
            b.args.append("--disable-userns")
    else:
        b.args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    program = seccomp.program()
    if program is not None:
        b.seccomp(program)

    b.ro_bind("/usr")
    for name in HOST_DIRS:
        host = f"/{name}"
        if os.path.islink(host):
            b.args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            b.ro_bind(host)
    b.dir("/etc")
    for name in ("ld.so.cache", "localtime"):
        b.ro_bind(f"/etc/{name}", try_=True)
    shown_uid = uid if uid is not None else os.getuid()
    shown_gid = uid if uid is not None else os.getgid()
    b.file("/etc/passwd", f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                          f"notebook:x:{shown_uid}:{shown_gid}:notebook:{HOME}:/usr/sbin/nologin\n")
    b.file("/etc/group", f"root:x:0:\nnotebook:x:{shown_gid}:\n")
    if config.network:
        for name in NETWORK_ETC:
            b.ro_bind(f"/etc/{name}", try_=True)
    else:
        b.file("/etc/hosts", "127.0.0.1 localhost notebook\n::1 localhost\n")

    # The private /tmp, /dev/shm and home first: the runtime is bound over them afterwards, so a
    # virtual environment that lives under /tmp (a checkout there) stays visible.
    b.args += ["--proc", "/proc", "--dev", "/dev"]
    b.tmpfs("/dev/shm", limits.tmp_bytes)
    b.tmpfs("/tmp", limits.tmp_bytes)
    b.tmpfs(HOME, limits.workdir_bytes)
    bound: list[str] = []
    for path in (runtime.executable, runtime.libpython, *runtime.stdlib, *runtime.site):
        if path and not _under(path, "/usr") and not any(_under(path, d) for d in bound):
            b.ro_bind(path)
            bound.append(path)
    for path in runtime.hidden:
        b.args += ["--perms", "0555", "--size", "4096", "--tmpfs", path, "--remount-ro", path]
    for name in SCRIPTS:
        b.ro_bind(str(script_dir / name), f"{KERNEL_DIR}/{name}")

    b.args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", HOME, "--clearenv"]
    for key, value in sandbox_env(limits).items():
        b.args += ["--setenv", key, value]
    b.args += ["--", runtime.executable, "-I", "-S", f"{KERNEL_DIR}/child.py", *child_args]
    return SandboxCommand([bwrap, *b.args], [(i + 1, data) for i, data in b.data])


def sandbox_env(limits: KernelLimits) -> dict[str, str]:
    """The whole environment of a sandboxed kernel: nothing comes from the server's."""
    threads = str(max(1, round(limits.cpus)))
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": HOME, "USER": "notebook", "LOGNAME": "notebook",
            "LANG": "C.UTF-8", "TMPDIR": "/tmp", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "NUMEXPR_MAX_THREADS": threads}
