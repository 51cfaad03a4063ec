"""The bubblewrap command line a kernel runs in, and the seccomp filter it carries: built from
a described runtime, without starting anything."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from turnstream.notebook.config import KernelLimits, SandboxConfig
from turnstream.notebook.sandbox import HOME, Runtime, build_command, closed_to_others, sandbox_env
from turnstream.notebook.seccomp import SYSCALLS, program

RUNTIME = Runtime(
    executable="/opt/py/bin/python3.11",
    stdlib=("/opt/py/lib/python3.11", "/opt/py/lib/python3.11/lib-dynload"),
    site=("/home/me/project/.venv/lib/python3.11/site-packages",),
    hidden=("/opt/py/lib/python3.11/site-packages",),
    libpython="/opt/py/lib/libpython3.11.so.1.0",
)
LIMITS = KernelLimits(workdir_bytes=10_000, tmp_bytes=2_000)


def _command(*, network: bool = False, uid: int | None = 1_500_000_007) -> list[str]:
    """The command for a root server (a kernel uid) unless ``uid`` is None."""
    return build_command(bwrap="/usr/bin/bwrap", runtime=RUNTIME, config=SandboxConfig(network=network),
                         limits=LIMITS, child_args=["{}"], uid=uid, script_dir=Path("/src/turnstream/notebook")).argv


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def test_namespaces_a_new_session_and_death_with_the_parent() -> None:
    argv = _command()
    for flag in ("--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                 "--unshare-net", "--clearenv", "--seccomp"):
        assert flag in argv
    # As root: no user namespace; only the two capabilities the kernel needs to drop to its uid.
    assert "--unshare-user" not in argv
    assert argv[argv.index("--cap-drop"):argv.index("--cap-drop") + 6] == [
        "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]


def test_the_filesystem_shows_only_the_runtime_read_only() -> None:
    argv = _command()
    binds = _pairs(argv, "--ro-bind")
    assert "/usr" in binds
    for path in (RUNTIME.executable, RUNTIME.libpython, RUNTIME.stdlib[0], RUNTIME.site[0]):
        assert path in binds
    assert RUNTIME.stdlib[1] not in binds  # inside the standard library's bind already
    assert "/home/me/project" not in binds and "/home/me" not in binds  # only the packages show
    assert not _pairs(argv, "--bind")  # nothing is writable from the host
    assert "/src/turnstream/notebook/child.py" in binds
    # The base interpreter's own packages hide behind an empty read-only directory.
    assert RUNTIME.hidden[0] in _pairs(argv, "--tmpfs") and RUNTIME.hidden[0] in _pairs(argv, "--remount-ro")
    # Every parent of a mount point is made with the default mode, before the mount.
    dirs = _pairs(argv, "--dir")
    for parent in ("/home", "/home/me", "/home/me/project/.venv/lib/python3.11", "/opt/py/bin", "/etc"):
        assert parent in dirs
    assert argv.index("/home/me/project/.venv/lib/python3.11") < argv.index(RUNTIME.site[0])


def test_size_capped_tmpfs_mounts_and_a_read_only_root() -> None:
    argv = _command()
    for dest, size in ((HOME, LIMITS.workdir_bytes), ("/tmp", LIMITS.tmp_bytes), ("/dev/shm", LIMITS.tmp_bytes)):
        i = argv.index(dest, argv.index("--dev"))
        assert argv[i - 5:i] == ["--perms", "1777", "--size", str(size), "--tmpfs"]
    assert {"/", "/dev"} <= set(_pairs(argv, "--remount-ro"))
    assert _pairs(argv, "--chdir") == [HOME]


def test_a_runtime_under_tmp_is_bound_over_the_private_tmp() -> None:
    # A checkout (and its .venv) under /tmp: the private /tmp is mounted first, or it would hide
    # the packages (seen as "No module named 'pandas'" in every cell).
    runtime = Runtime(executable="/opt/py/bin/python3.11", stdlib=("/opt/py/lib/python3.11",),
                      site=("/tmp/checkout/.venv/lib/python3.11/site-packages",), hidden=(), libpython=None)
    argv = build_command(bwrap="/usr/bin/bwrap", runtime=runtime, config=SandboxConfig(), limits=LIMITS,
                         child_args=["{}"], uid=None, script_dir=Path("/src/turnstream/notebook")).argv
    private_tmp = argv.index("/tmp", argv.index("--dev"))
    assert argv[private_tmp - 1] == "--tmpfs"
    assert argv.index(runtime.site[0]) > private_tmp
    assert runtime.site[0] in _pairs(argv, "--ro-bind")


def test_the_environment_is_explicit() -> None:
    argv = _command()
    env = dict(zip(_pairs(argv, "--setenv"), [argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"],
                   strict=True))
    assert env == sandbox_env(LIMITS)
    assert not any(k.startswith("TURNSTREAM_") or k.endswith("_API_KEY") for k in env)
    assert env["HOME"] == HOME and env["OMP_NUM_THREADS"] == "1"


def test_network_on_shares_the_host_network_and_its_name_service_files() -> None:
    argv = _command(network=True)
    assert "--unshare-net" not in argv
    assert "/etc/resolv.conf" in _pairs(argv, "--ro-bind-try")


def test_without_root_bubblewrap_makes_a_user_namespace() -> None:
    argv = _command(uid=None)
    assert "--unshare-user" in argv and "--cap-add" not in argv


def test_data_files_are_read_from_pipes() -> None:
    cmd = build_command(bwrap="/usr/bin/bwrap", runtime=RUNTIME, config=SandboxConfig(), limits=LIMITS,
                        child_args=["{}"], uid=1_500_000_007, script_dir=Path("/src"))
    filled = {cmd.argv[i + 1] if cmd.argv[i - 1] == "--ro-bind-data" else "seccomp": data
              for i, data in cmd.data}
    assert filled["/etc/passwd"].endswith(b"notebook:x:1500000007:1500000007:notebook:/home/notebook:"
                                          b"/usr/sbin/nologin\n")
    assert filled["seccomp"] == program()
    assert all(cmd.argv[i] == "FD" for i, _ in cmd.data)


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_every_jump_of_the_seccomp_filter_lands_inside_it(machine: str) -> None:
    code = program(machine)
    assert code is not None and len(code) % 8 == 0
    ops = [struct.unpack("<HBBI", code[i:i + 8]) for i in range(0, len(code), 8)]
    for pc, (op, jt, jf, _) in enumerate(ops):
        if op & 0x07 == 0x05:  # a jump
            assert pc + 1 + jt < len(ops) and pc + 1 + jf < len(ops)
    assert ops[-1][0] == 0x06 and ops[-2][0] == 0x06  # ends with returns


def test_no_filter_for_an_unknown_machine() -> None:
    assert program("s390x") is None


def test_a_root_server_refuses_files_its_kernels_could_not_read(tmp_path: Path) -> None:
    for name in ("python3", "child.py", "sqltext.py", "files.py"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o644)
    runtime = Runtime(str(tmp_path / "python3"), (str(tmp_path),), (str(tmp_path),), (), None)
    tmp_path.chmod(0o755)
    assert closed_to_others(runtime, tmp_path) is None
    (tmp_path / "child.py").chmod(0o600)  # a checkout made with umask 077
    assert closed_to_others(runtime, tmp_path) == str(tmp_path / "child.py")
