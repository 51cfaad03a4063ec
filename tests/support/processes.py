"""The host's view of processes, read from ``/proc``: who descends from whom, which are kernels,
which are still alive. A zombie counts as gone (it runs nothing; its parent reaps it later)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

KERNEL_MARK = "/opt/turnstream/child.py"
"""In a sandboxed kernel's command line (the path the sandbox shows its script at)."""

T = TypeVar("T")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def parent(pid: int) -> int | None:
    """The parent's pid, or None when the process is gone."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def session(pid: int) -> int | None:
    """The session id, or None when the process is gone."""
    try:
        return os.getsid(pid)
    except ProcessLookupError:
        return None


def living(pids: Iterable[int]) -> set[int]:
    return {p for p in pids if alive(p)}


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> set[int]:
    """Every living process below ``root``."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[0] not in ("Z", "X"):
                children.setdefault(stat[1], []).append(int(name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kernel_processes(server_pid: int) -> set[int]:
    """Processes below the server that run a kernel's script (the kernels, and what their
    cells forked), not the bubblewrap processes around them."""
    found = set()
    for pid in descendants(server_pid):
        argv = cmdline(pid).split(" ")
        if KERNEL_MARK in argv and os.path.basename(argv[0]) not in ("bwrap", "sh"):
            found.add(pid)
    return found


def sandbox_processes(server_pid: int) -> set[int]:
    """Every process below the server that belongs to a kernel (bubblewrap's included)."""
    return {p for p in descendants(server_pid) if KERNEL_MARK in cmdline(p)}


def wait_for(what: str, check: Callable[[], T], timeout: float = 15.0,
             error: type[Exception] = AssertionError) -> T:
    """Poll ``check`` until it returns something true, with a deadline (then ``error``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)
