"""Making kernel cgroups, over a directory tree standing in for cgroupfs (plain files take the
writes): which limits land in which files, for v1 and v2, and what happens when the server's
own v2 group holds processes. CI runs cgroup v1 for real; this is where v2 runs at all."""

from __future__ import annotations

import os
from pathlib import Path

from turnstream.notebook.cgroups import Cgroups, _Mount, _open_v1, _open_v2
from turnstream.notebook.config import KernelLimits

LIMITS = KernelLimits(memory_bytes=512 * 1024**2, processes=100, cpus=1.5)


def _v2_tree(root: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    own = root / "user.slice" / "app.scope"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text(controllers + "\n")
    (own / "cgroup.subtree_control").write_text("")
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n")
    return own


def test_v2_hands_memory_pids_and_cpu_to_a_kernel_group(tmp_path: Path) -> None:
    own = _v2_tree(tmp_path)
    groups = _open_v2([_Mount("/", str(tmp_path), "cgroup2", frozenset())], {"": "/user.slice/app.scope"})
    assert isinstance(groups, Cgroups), groups
    parent = own / f"turnstream-kernels-{os.getpid()}"
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    group = groups.create(LIMITS)
    d = group.dirs[0]
    assert d.parent == parent
    assert (d / "memory.max").read_text() == str(512 * 1024**2)
    assert (d / "memory.swap.max").read_text() == "0"
    assert (d / "pids.max").read_text() == "104"  # the kernel's processes, the launcher and bubblewrap's two
    assert (d / "cpu.max").read_text() == "150000 100000"
    assert group.procs_files == [str(d / "cgroup.procs")]
    assert groups.describe() == "cgroup v2 (memory, pids, cpu)"


def test_v2_without_memory_says_so(tmp_path: Path) -> None:
    own = _v2_tree(tmp_path, "cpu io")
    why = _open_v2([_Mount("/", str(tmp_path), "cgroup2", frozenset())], {"": "/user.slice/app.scope"})
    assert why == f"cgroup v2 group {own} does not offer memory, pids"


def test_v2_moves_the_server_into_a_leaf_before_handing_out_controllers(tmp_path: Path) -> None:
    own = _v2_tree(tmp_path)
    (own / "cgroup.subtree_control").unlink()
    (own / "cgroup.subtree_control").mkdir()  # writing it fails, as it does while the group holds processes
    why = _open_v2([_Mount("/", str(tmp_path), "cgroup2", frozenset())], {"": "/user.slice/app.scope"})
    assert (own / "turnstream-server" / "cgroup.procs").read_text() == str(os.getpid())
    assert why == f"cannot hand memory and pids to sub-groups of {own}: Is a directory"


def test_v1_makes_a_group_per_hierarchy(tmp_path: Path) -> None:
    mounts = []
    for name in ("memory", "pids", "cpu"):
        (tmp_path / name / "server").mkdir(parents=True)
        mounts.append(_Mount("/", str(tmp_path / name), "cgroup", frozenset({"rw", name})))
    groups = _open_v1(mounts, {"memory": "/server", "pids": "/server", "cpu": "/server"})
    assert isinstance(groups, Cgroups), groups
    group = groups.create(LIMITS)
    memory, pids, cpu = group.dirs
    assert (memory / "memory.limit_in_bytes").read_text() == str(512 * 1024**2)
    assert (pids / "pids.max").read_text() == "104"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert memory.parent == tmp_path / "memory" / "server" / f"turnstream-{os.getpid()}"
    assert groups.describe() == "cgroup v1 (memory, pids, cpu)"


def test_v1_without_a_pids_hierarchy_says_so(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    why = _open_v1([_Mount("/", str(tmp_path / "memory"), "cgroup", frozenset({"memory"}))], {"memory": "/"})
    assert why == "no cgroup v1 pids hierarchy"
