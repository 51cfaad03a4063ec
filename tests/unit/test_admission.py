"""The admission gate for new turns (server/admission.py): its policy, tick by tick.

The watcher's own timer is set an hour ahead here, so that nothing but the test calls
``tick``: each test plays the loop's lag it wants to see."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from turnstream.server.admission import CUT_EVERY, MIN_LIMIT, Admission, Overloaded

HOUR = 3600.0


@pytest.fixture
async def gate() -> AsyncIterator[Admission]:
    adm = Admission(max_lag=0.015, interval=HOUR, max_wait=30, limit=4)
    yield adm
    await adm.aclose()


def waiter(adm: Admission) -> asyncio.Task[None]:
    return asyncio.ensure_future(adm.admit())


async def settle() -> None:
    """Let the tasks just created run up to their first wait (scheduling, not timing)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_off_admits_everything_at_once() -> None:
    adm = Admission(max_lag=0, limit=1)
    for _ in range(1000):
        await adm.admit()
    adm.release()
    assert adm.waiting == 0 and adm.running == 0 and adm._watcher is None


async def test_turns_past_the_limit_wait_for_one_to_end(gate: Admission) -> None:
    for _ in range(4):
        await asyncio.wait_for(gate.admit(), 1)
    late = [waiter(gate) for _ in range(3)]
    await settle()
    assert gate.running == 4 and gate.waiting == 3 and not any(t.done() for t in late)
    gate.release()  # one ends: the first in line starts
    await settle()
    assert [t.done() for t in late] == [True, False, False]
    gate.release()
    gate.release()
    await asyncio.wait_for(asyncio.gather(*late), 1)
    assert gate.running == 4 and gate.admitted == 7 and gate.waiting == 0


async def test_the_limit_grows_while_the_loop_is_on_time_and_turns_wait(gate: Admission) -> None:
    for _ in range(4):
        await gate.admit()
    held = [waiter(gate) for _ in range(3)]
    await settle()
    gate.tick(0.001)  # on time, the limit holds turns back: one more may run
    await settle()
    assert gate.limit == 5 and [t.done() for t in held] == [True, False, False]
    gate.tick(0.001)
    gate.tick(0.001)
    await asyncio.wait_for(asyncio.gather(*held), 1)
    gate.tick(0.001)  # nobody waits: no reason to grow
    assert gate.limit == 7 and gate.running == 7


async def test_a_late_loop_cuts_the_limit_once_per_burst(gate: Admission) -> None:
    gate.limit = 50
    gate.tick(0.050)  # 50 ms late: over the 15 ms limit
    assert gate.limit == 40
    for _ in range(CUT_EVERY - 1):
        gate.tick(0.050)
    assert gate.limit == 40  # the same burst of lag cuts once
    gate.tick(0.050)
    assert gate.limit == 32
    for _ in range(100 * CUT_EVERY):
        gate.tick(1.0)
    assert gate.limit == MIN_LIMIT


async def test_a_cut_below_what_runs_lets_nobody_in_until_enough_end(gate: Admission) -> None:
    gate.limit = 10
    for _ in range(10):
        await gate.admit()
    held = waiter(gate)
    await settle()
    gate.tick(0.050)  # late: the limit drops to 8 while 10 run
    await settle()
    assert gate.limit == 8 and not held.done()
    gate.release()
    gate.release()
    await settle()
    assert not held.done()  # 8 run: still at the limit
    gate.release()
    await asyncio.wait_for(held, 1)
    assert gate.running == 8


async def test_a_turn_not_admitted_in_time_is_refused_with_a_retry_hint() -> None:
    adm = Admission(max_lag=0.015, interval=HOUR, max_wait=0.05, limit=1)
    try:
        await adm.admit()
        with pytest.raises(Overloaded) as err:
            await adm.admit()
        assert err.value.retry_after >= 1 and "capacity" in str(err.value)
        assert adm.refused == 1 and adm.waiting == 0 and adm.running == 1
    finally:
        await adm.aclose()


async def test_a_cancelled_waiter_leaves_the_line_and_takes_no_slot(gate: Admission) -> None:
    for _ in range(4):
        await gate.admit()
    first, second = waiter(gate), waiter(gate)
    await settle()
    first.cancel()
    await settle()
    assert gate.waiting == 1
    gate.release()
    await asyncio.wait_for(second, 1)
    assert first.cancelled() and gate.running == 4


async def test_a_waiter_let_in_as_it_is_cancelled_keeps_the_count_right(gate: Admission) -> None:
    for _ in range(4):
        await gate.admit()
    late = waiter(gate)
    await settle()
    gate.release()  # lets `late` in ...
    late.cancel()  # ... as its request goes away
    try:
        await late
        owns_a_slot = 1  # asyncio.wait_for let the admission win: the caller runs its turn
    except asyncio.CancelledError:
        owns_a_slot = 0  # the cancellation won: the slot went back
    assert gate.running == 3 + owns_a_slot and gate.waiting == 0


async def test_the_watcher_stops_when_idle_and_restarts_on_demand() -> None:
    adm = Admission(max_lag=0.015, interval=0.001, max_wait=30)
    await adm.admit()
    adm.release()
    watcher = adm._watcher
    assert watcher is not None
    await asyncio.wait_for(watcher, 10)  # about IDLE_TICKS ticks with nothing running
    assert adm._watcher is None and adm.lag == 0.0
    await adm.admit()
    assert adm._watcher is not None
    await adm.aclose()
