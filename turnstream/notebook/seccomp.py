"""A seccomp filter for kernels: the system calls a notebook never needs, and that make most
of the Linux kernel's attack surface reachable from an unprivileged process, fail with EPERM.

Refused: making namespaces (``unshare``, ``setns``, ``clone`` with ``CLONE_NEWUSER``; user
namespaces open the kernel's privileged code paths to unprivileged users), mounting,
``bpf``, ``perf_event_open``, ``userfaultfd``, io_uring, the key-management calls, and module
and kexec loading. ``clone3`` fails with ENOSYS so that the C library falls back to ``clone``,
whose flags a filter can read (``clone3`` passes them in memory it cannot). System calls of
another ABI than the native one (i386 or x32 on x86-64) are refused.

The filter is classic BPF (``struct sock_filter``), handed to bubblewrap with ``--seccomp``.
Built for x86-64 and AArch64; on another machine there is none, and docs/security.md says so.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: low word of args[0])
CLONE_NEWUSER = 0x10000000
X32_BIT = 0x40000000

_DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
           "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "perf_event_open", "userfaultfd",
           "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key",
           "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module")

SYSCALLS: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, {
        "clone": 56, "clone3": 435, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
        "pivot_root": 155, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248,
        "request_key": 249, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
        "delete_module": 176}),
    "aarch64": (0xC00000B7, {
        "clone": 220, "clone3": 435, "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106}),
}


Op = tuple[int, int, str | int, str | int]
"""(code, k, jump-if-true, jump-if-false): a jump is a label, or 0 for the next instruction."""


def _assemble(ops: list[Op | str]) -> bytes:
    """Resolve labels (the strings between instructions) into relative jumps."""
    labels: dict[str, int] = {}
    code: list[Op] = []
    for item in ops:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)

    def rel(target: str | int, pc: int) -> int:
        return target if isinstance(target, int) else labels[target] - pc - 1

    return b"".join(struct.pack("<HBBI", op, rel(jt, pc), rel(jf, pc), k)
                    for pc, (op, k, jt, jf) in enumerate(code))


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one) as bytes, or None when there is none."""
    machine = machine or platform.machine()
    table = SYSCALLS.get(machine)
    if table is None:
        return None
    arch, numbers = table
    ops: list[Op | str] = [
        (_LD_ABS, _ARCH, 0, 0),
        (_JEQ, arch, 0, "deny"),  # another ABI (i386 on x86-64): refused
        (_LD_ABS, _NR, 0, 0),
    ]
    if machine == "x86_64":
        ops.append((_JGE, X32_BIT, "deny", 0))  # the x32 ABI
    ops += [(_JEQ, numbers[name], "deny", 0) for name in _DENIED]
    ops += [
        (_JEQ, numbers["clone3"], "enosys", 0),
        (_JEQ, numbers["clone"], "clone", 0),
        (_RET, _ALLOW, 0, 0),
        "clone",
        (_LD_ABS, _ARG0, 0, 0),
        (_JSET, CLONE_NEWUSER, "deny", 0),
        (_RET, _ALLOW, 0, 0),
        "deny",
        (_RET, _ERRNO | errno.EPERM, 0, 0),
        "enosys",
        (_RET, _ERRNO | errno.ENOSYS, 0, 0),
    ]
    return _assemble(ops)
