"""Picking a turn up again: after a pause for the client, or after its runner died.

``Course`` is where a turn stands: its step, and whether the next step is the last (the step
limit, or a budget). The conductor keeps it; before its loop starts, ``after_pause`` and
``after_takeover`` set it from what the store holds, and run the calls the turn goes on with.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..blocks import ToolUseBlock
from ..budgets import Meter
from ..events import StepRestart, StepStart, StepUsage
from ..lifecycle import TurnRecorder, approvals_given
from ..store.protocol import Store
from .step import StepEnded
from .tool_round import ToolRound

RESTARTED = "the process running the turn stopped; this step is requested again"
TAKEOVER_GAP = 1_000_000
"""How far a runner that takes a turn over moves its event numbers past the last stored one.
The runner that died sent live events (deltas) numbered past its last stored event, and a
client may have seen them: the next numbers must stay above any it could have used, or a
client resuming from such an id would skip the new events (``n`` may have gaps)."""


@dataclass(slots=True)
class Course:
    """Where a turn stands, as its conductor decides what comes next."""

    step: int = 0
    """The step being run, or the last one that ended."""
    final_step: bool = False
    """The next step is the last, with tools off."""
    budget_stop: bool = False
    """It is because a budget was reached (else the step limit)."""


async def after_pause(store: Store, rec: TurnRecorder, calls: ToolRound, meter: Meter, course: Course) -> bool:
    """A turn whose client answered every request (``TurnRunner.resume``): run the approved
    calls, with the budgets' answer if it waited for more budget. True when some ask the
    client (again)."""
    course.step = rec.steps
    approved = {k: a.answer for k, a in (await approvals_given(store, rec.turn_id)).items() if a.approved}
    events = await store.events_after(rec.turn_id, 0)
    if await meter.on_resume(rec, events, set(approved)) == "declined":
        course.final_step = course.budget_stop = True
    return await calls.run_pending(approved)


async def after_takeover(store: Store, rec: TurnRecorder, calls: ToolRound, meter: Meter, course: Course, *,
                         max_steps: int) -> bool | StepEnded:
    """A turn whose runner died (``TurnRunner.take_over`` says what happens where): True when
    it waits for the client, a ``StepEnded`` when its last step's calls are still to be
    decided, False when the loop goes on with the next step."""
    turn_id = rec.turn_id
    rec.n += TAKEOVER_GAP
    last = rec.steps
    course.step = last
    unanswered = rec.unanswered()
    started = {c.tool_use_id: c for c in await store.tool_calls(turn_id)}
    if unanswered and any(c.tool_use_id in started for c in unanswered):
        return await calls.resume_calls(unanswered, started)
    events = [e.event() for e in await store.events_after(turn_id, 0)]
    # The highest step that began streaming (a step with no finished block yet has
    # only its step_start stored), and whether the last one with blocks had ended.
    began = max((ev.step for ev in events if isinstance(ev, StepStart)), default=0)
    usage = next((ev.usage for ev in events if isinstance(ev, StepUsage) and ev.step == last), None)
    if unanswered and usage is not None and began <= last:
        # The step's stream ended; the process stopped before any of its calls started.
        course.final_step = last > max_steps
        return StepEnded(unanswered, "tool_use", await meter.charge(rec, last, usage))
    last_calls = [b for b in rec.blocks if isinstance(b, ToolUseBlock) and b.step == last]
    if last_calls and not unanswered and began <= last:
        return False  # the step ended and its calls are answered: the next one starts
    step = max(last, began)
    if step:
        await store.discard_step(turn_id, step)
        rec.blocks = [b for b in rec.blocks if b.step != step]
        course.step = step - 1
        await rec.emit(StepRestart(step=step, reason=RESTARTED))
    return False


__all__ = ["RESTARTED", "TAKEOVER_GAP", "Course", "after_pause", "after_takeover"]
