"""The admission gate for new turns (server/admission.py): its policy, tick by tick.

The watcher's own timer is set an hour ahead here, so that nothing but the test calls
``tick``: each test plays the loop's lag and CPU use it wants the gate to see."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from turnstream.server.admission import BUSY_GROW, MIN_LIMIT, PACE, START_SHARE, WINDOW, Admission, Overloaded

HOUR = 3600.0
ON_TIME, LATE = 0.001, 0.050  # the gate's max_lag is 10 ms
BUSY = 0.95  # over BUSY_GROW: the limit does not grow


def make(limit: int, max_wait: float = 30, min_line: int = 1000) -> Admission:
    """A gate whose line is long enough for the policy tests (the line has tests of its own)."""
    return Admission(max_lag=0.010, interval=HOUR, max_wait=max_wait, limit=limit, min_line=min_line)


@pytest.fixture
async def gate() -> AsyncIterator[Admission]:
    adm = make(4)
    yield adm
    await adm.aclose()


def waiters(adm: Admission, n: int) -> list[asyncio.Task[None]]:
    return [asyncio.ensure_future(adm.admit()) for _ in range(n)]


async def settle() -> None:
    """Let the tasks just created run up to their first wait (scheduling, not timing)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def tick(adm: Admission, lag: float = ON_TIME, busy: float = BUSY, times: int = 1) -> None:
    for _ in range(times):
        adm.tick(lag, busy)
    await settle()


async def align(adm: Admission) -> None:
    """Tick (busy, on time) to the end of the gate's current decision window."""
    while adm._ticks % WINDOW:
        await tick(adm)


async def fill(adm: Admission) -> None:
    """Admit turns up to the limit (a tick lets limit / PACE in)."""
    while adm.running < adm.limit:
        before = adm.running
        if adm.waiting == 0:
            waiters(adm, adm.limit - adm.running)
        await tick(adm)
        assert adm.running > before


async def test_off_admits_everything_at_once() -> None:
    adm = Admission(max_lag=0, limit=1)
    for _ in range(1000):
        await adm.admit()
    adm.release()
    assert adm.waiting == 0 and adm.running == 0 and adm._watcher is None


async def test_turns_past_the_limit_wait_for_one_to_end_first_come_first_served(gate: Admission) -> None:
    await fill(gate)
    late = waiters(gate, 3)
    await tick(gate, times=3)
    assert gate.running == 4 and gate.waiting == 3 and not any(t.done() for t in late)
    gate.release()  # one ends: the first in line starts at the next tick
    await tick(gate)
    assert [t.done() for t in late] == [True, False, False]
    gate.release()
    gate.release()
    await tick(gate, times=2)
    await asyncio.wait_for(asyncio.gather(*late), 1)
    assert gate.running == 4 and gate.admitted == 7 and gate.waiting == 0


async def test_starts_are_paced_per_tick() -> None:
    adm = make(100)
    try:
        per_tick = 100 // PACE
        for _ in range(per_tick):  # the first tick's allowance goes at once
            await asyncio.wait_for(adm.admit(), 1)
        held = waiters(adm, 3 * per_tick)
        await settle()
        assert adm.running == per_tick and adm.waiting == 3 * per_tick
        await tick(adm)
        assert adm.running == 2 * per_tick
        assert [t.done() for t in held] == [True] * per_tick + [False] * 2 * per_tick
    finally:
        await adm.aclose()


async def test_the_limit_grows_while_turns_wait_and_the_core_has_room(gate: Admission) -> None:
    gate.limit = 50
    await fill(gate)
    waiters(gate, 30)
    await align(gate)
    await tick(gate, busy=BUSY, times=WINDOW)
    assert gate.limit == 50  # the core is busy: no growth
    await tick(gate, busy=BUSY_GROW * 0.8, times=WINDOW)
    assert gate.limit == 52  # some room: by a 25th
    await tick(gate, busy=0.05, times=WINDOW)
    assert gate.limit == 58  # idle: by an eighth
    lag_in_window = [ON_TIME] * (WINDOW - 1) + [0.012]
    for lag in lag_in_window:  # one late tick in the window: no cut, but no growth either
        await tick(gate, lag=lag, busy=0.05)
    assert gate.limit == 58


async def test_no_growth_without_turns_waiting(gate: Admission) -> None:
    await fill(gate)
    await tick(gate, busy=0.05, times=5 * WINDOW)
    assert gate.limit == 4


async def test_lasting_lag_cuts_the_limit_once_per_window(gate: Admission) -> None:
    gate.limit = 50
    await fill(gate)
    waiters(gate, 5)
    await settle()
    await align(gate)
    await tick(gate, lag=LATE)
    assert gate.limit == 50  # one late tick is a hiccup
    await tick(gate, lag=LATE)
    assert gate.limit == 40  # two: a fifth off
    limits = []
    for _ in range(3 * WINDOW):  # lag that goes on: a cut per window at most, each a fifth
        await tick(gate, lag=LATE)
        limits.append(gate.limit)
    cuts = [i for i in range(1, len(limits)) if limits[i] != limits[i - 1]]
    assert cuts and all(b - a >= WINDOW for a, b in itertools.pairwise(cuts))
    assert set(limits) <= {40, 32, 26, 21} and len(cuts) >= 2
    await tick(gate, lag=1.0, times=100 * WINDOW)
    assert gate.limit == MIN_LIMIT


async def test_no_cut_while_nobody_waits(gate: Admission) -> None:
    gate.limit = 50
    await fill(gate)
    await tick(gate, lag=LATE, times=3 * WINDOW)
    assert gate.limit == 50  # nothing to hold back; turns arriving later meet the lag then


async def test_lag_with_few_turns_running_is_not_theirs(gate: Admission) -> None:
    gate.limit = 50  # starts are paced: one per tick at this limit
    waiters(gate, 40)
    await tick(gate, lag=LATE, times=20)
    assert gate.running <= 21 and gate.limit == 50


async def test_a_cut_below_what_runs_lets_nobody_in_until_enough_end(gate: Admission) -> None:
    gate.limit = 10
    await fill(gate)
    held = waiters(gate, 1)[0]
    await settle()
    await align(gate)
    await tick(gate, lag=LATE, times=2)  # the limit drops to 8 while 10 run
    assert gate.limit == 8 and not held.done()
    gate.release()
    gate.release()
    await tick(gate)
    assert not held.done()  # 8 run: still at the limit
    gate.release()
    await tick(gate)
    await asyncio.wait_for(held, 1)
    assert gate.running == 8


async def test_a_turn_that_finds_the_line_full_is_refused_at_once_with_a_retry_hint() -> None:
    adm = make(1, max_wait=3600, min_line=2)  # a refusal that waited would hang the test
    try:
        await adm.admit()
        line = waiters(adm, 2)
        await settle()
        with pytest.raises(Overloaded) as err:
            await asyncio.wait_for(adm.admit(), 30)
        assert err.value.retry_after >= 1 and "capacity" in str(err.value)
        assert adm.refused == 1 and adm.waiting == 2 and adm.running == 1
        for t in line:
            t.cancel()
    finally:
        await adm.aclose()


async def test_the_line_is_the_free_places_and_the_turns_that_ended_within_the_wait() -> None:
    adm = make(3, max_wait=3600, min_line=1)
    try:
        assert adm.line() == 3  # three places free: a burst of three waits only for the pacing
        adm.running = 3
        assert adm.line() == 1
        for _ in range(4):
            adm.release()  # four ended within the wait: half as many places free up in half of it
        adm.running = 3
        assert adm.line() == 2
    finally:
        await adm.aclose()


async def test_a_turn_whose_wait_runs_out_starts_past_the_limit() -> None:
    adm = make(1, max_wait=0.05)
    try:
        await adm.admit()
        await adm.admit()  # nothing ended: its wait runs out and it starts anyway
        assert adm.forced == 1 and adm.refused == 0 and adm.running == 2 and adm.waiting == 0
    finally:
        await adm.aclose()


async def test_a_forced_start_leaves_part_of_the_wait_for_the_first_event() -> None:
    adm = make(1, max_wait=2.0)
    loop = asyncio.get_running_loop()
    try:
        await adm.admit()
        t0 = loop.time()
        await adm.admit()  # nothing ends: it is let in before its promise is due, not at it
        waited = loop.time() - t0
        assert adm.forced == 1
        assert 2.0 * START_SHARE <= waited < 2.0, waited
    finally:
        await adm.aclose()


async def test_a_cancelled_waiter_leaves_the_line_and_takes_no_slot(gate: Admission) -> None:
    await fill(gate)
    first, second = waiters(gate, 2)
    await settle()
    first.cancel()
    await settle()
    assert gate.waiting == 1
    gate.release()
    await tick(gate)
    await asyncio.wait_for(second, 1)
    assert first.cancelled() and gate.running == 4


async def test_a_waiter_let_in_as_it_is_cancelled_keeps_the_count_right(gate: Admission) -> None:
    await fill(gate)
    late = waiters(gate, 1)[0]
    await settle()
    gate.release()
    gate.tick(ON_TIME, BUSY)  # lets `late` in ...
    late.cancel()  # ... as its request goes away
    try:
        await late
        owns_a_slot = 1  # asyncio.wait_for let the admission win: the caller runs its turn
    except asyncio.CancelledError:
        owns_a_slot = 0  # the cancellation won: the slot went back
    assert gate.running == 3 + owns_a_slot and gate.waiting == 0


async def test_the_watcher_stops_when_idle_and_restarts_on_demand() -> None:
    adm = Admission(max_lag=0.010, interval=0.001, max_wait=30)
    await adm.admit()
    adm.release()
    watcher = adm._watcher
    assert watcher is not None
    await asyncio.wait_for(watcher, 10)  # about IDLE_TICKS ticks with nothing running
    assert adm._watcher is None and adm.lag == 0.0
    await adm.admit()
    assert adm._watcher is not None
    await adm.aclose()


async def test_turns_started_past_the_limit_shorten_the_line() -> None:
    adm = make(2, max_wait=3600, min_line=1)
    try:
        adm.running = 2
        for _ in range(6):
            adm.release()  # six ended lately: three places will come free in half the wait ...
        adm.running = 4  # ... but two turns run past the limit, and take the first two
        assert adm.line() == 1
    finally:
        await adm.aclose()
