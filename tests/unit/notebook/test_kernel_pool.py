"""KernelPool's decisions over stand-in kernels: the cap with least-recently-used eviction,
waiting while every kernel is busy, and the idle stop."""

from __future__ import annotations

import time
from typing import cast

import anyio
import pytest

from turnstream.errors import KernelError
from turnstream.notebook.config import PoolLimits
from turnstream.notebook.kernel import Kernel
from turnstream.notebook.pool import KernelPool


class FakeChannel:
    def __init__(self, kernel: FakeKernel) -> None:
        self.kernel = kernel

    def kill(self) -> None:
        self.kernel.killed += 1


class FakeKernel:
    """What the pool uses of a Kernel: ``alive`` and ``detach()``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.alive = False
        self.killed = 0

    def detach(self) -> FakeChannel | None:
        if not self.alive:
            return None
        self.alive = False
        return FakeChannel(self)


async def start(pool: KernelPool, kernel: FakeKernel, deadline: float | None = None) -> None:
    k = cast(Kernel, kernel)
    await pool.admit(k, deadline or time.monotonic() + 5)
    kernel.alive = True
    pool.admitted(k)


async def test_at_the_cap_the_least_recently_used_idle_kernel_stops() -> None:
    pool = KernelPool(PoolLimits(max_kernels=2, idle_timeout=None), None)
    a, b, c = FakeKernel("a"), FakeKernel("b"), FakeKernel("c")
    await start(pool, a)
    await start(pool, b)
    with pool.using(cast(Kernel, a)):  # a was used after b
        pass
    stopped: list[object] = []
    pool.on_stop = stopped.append
    await start(pool, c)
    assert (a.alive, b.alive, c.alive) == (True, False, True)
    assert b.killed == 1 and pool.live() == 2
    assert stopped == [b]  # its notebook is told


async def test_a_kernel_in_use_is_never_stopped_and_a_start_waits_for_one_to_finish() -> None:
    pool = KernelPool(PoolLimits(max_kernels=1, idle_timeout=None), None)
    a, b = FakeKernel("a"), FakeKernel("b")
    await start(pool, a)
    events: list[str] = []
    async with anyio.create_task_group() as tg:
        with pool.using(cast(Kernel, a)):
            async def start_b() -> None:
                await start(pool, b)
                events.append("b started")

            tg.start_soon(start_b)
            await anyio.wait_all_tasks_blocked()
            assert events == [] and a.alive  # b waits: a is running a cell
            events.append("a done")
    assert events == ["a done", "b started"]
    assert not a.alive and b.alive


async def test_a_start_gives_up_at_its_deadline_when_every_kernel_stays_busy() -> None:
    pool = KernelPool(PoolLimits(max_kernels=1, idle_timeout=None), None)
    a, b = FakeKernel("a"), FakeKernel("b")
    await start(pool, a)
    with pool.using(cast(Kernel, a)), pytest.raises(KernelError, match="TURNSTREAM_MAX_KERNELS"):
        await start(pool, b, time.monotonic() + 0.05)
    assert a.alive and not b.alive


async def test_idle_kernels_stop_and_busy_or_recent_ones_do_not() -> None:
    pool = KernelPool(PoolLimits(max_kernels=5, idle_timeout=60), None)
    old, busy, recent = FakeKernel("old"), FakeKernel("busy"), FakeKernel("recent")
    for k in (old, busy, recent):
        await start(pool, k)
    pool._slots[cast(Kernel, old)].last_used -= 61
    pool._slots[cast(Kernel, busy)].last_used -= 61
    stopped: list[object] = []
    pool.on_stop = stopped.append
    with pool.using(cast(Kernel, busy)):
        assert pool.stop_idle() == 1
    assert (old.alive, busy.alive, recent.alive) == (False, True, True)
    assert stopped == [old]
    pool.close()


def test_the_default_cap_comes_from_the_machine() -> None:
    pool = KernelPool(PoolLimits(), 2 * 1024**3)
    assert pool.max_kernels >= 2
    assert pool.idle_timeout == 900
