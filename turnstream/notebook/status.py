"""Whether notebook cells can run here, and how isolated they are: what the server prints at
start and the page shows (``notebook_state["sandbox"]``).

The probe starts one real kernel with the configured sandbox and limits and stops it: the
same path every kernel takes, so what it reports is what a cell will meet.
"""

from __future__ import annotations

import functools
import logging
import sys
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import KernelError
from .config import KernelLimits, SandboxConfig
from .launch import limits_note

log = logging.getLogger(__name__)

OFF_WARNING = (
    "Notebook cells run WITHOUT a sandbox (TURNSTREAM_NOTEBOOK_SANDBOX=off): cell code can read and change "
    "everything the server's user can, other users' conversations and keys included.")


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    mode: Literal["bubblewrap", "off", "unavailable"]
    network: bool
    limits: str
    """What enforces memory and process limits (a cgroup version, or rlimits and why)."""
    warning: str | None = None
    """Set when cells run unsandboxed or cannot run; says why and what to do."""
    start_seconds: float | None = None
    """How long the probe's kernel took to start and say ready."""

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "network": self.network, "limits": self.limits, "warning": self.warning}

    def summary(self) -> str:
        """One line for the server's start-up output."""
        if self.warning:
            return f"WARNING: {self.warning}"
        network = "network on" if self.network else "no network"
        started = f"; a kernel starts in {self.start_seconds * 1000:.0f} ms" if self.start_seconds else ""
        return f"Notebook cells run in a bubblewrap sandbox ({network}; limits by {self.limits}{started})."


def probe_sandbox(config: SandboxConfig, limits: KernelLimits, python: str = sys.executable) -> SandboxStatus:
    """Whether a kernel starts with ``config`` (remembered per process)."""
    return _probe(config, limits, python)


@functools.cache
def _probe(config: SandboxConfig, limits: KernelLimits, python: str) -> SandboxStatus:
    from .kernel import Kernel

    note = limits_note(config)
    try:
        seconds = Kernel(limits, sandbox=config, python=python).check_start()
    except KernelError as exc:
        log.warning("notebook kernels cannot start: %s", exc)
        return SandboxStatus("unavailable", config.network, note, str(exc))
    if config.mode == "off":
        return SandboxStatus("off", config.network, note, OFF_WARNING, seconds)
    return SandboxStatus("bubblewrap", config.network, note, None, seconds)
