"""A message sent while the session's turn is open (docs/steering.md).

The turn waits on approvals only: every waiting call is denied with the message as the
reason, and the turn goes on (the model reads the denials, the user's words in them). The
turn runs: the message is queued in the store, where the runner takes it at the next step,
whichever process runs it (``Store.queue_message``; ``queued_messages=next_turn`` makes it
start the next turn instead). Anything else (a client tool's result awaited, images sent to a
turn that waits) is refused with 409, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..blocks import Attachment, Session, ToolResultBlock, Turn
from ..events import ToolApproval, ToolRequest
from ..lifecycle import submit_tool_result
from ..store.protocol import StoredEvent
from .errors import conflict
from .models import SteerOut
from .state import AppState


async def steer(state: AppState, session: Session, text: str, refs: Sequence[Attachment]) -> SteerOut | None:
    """Give ``text`` to the session's open turn; None when the session has no open turn any more
    (the caller starts one). 409 when the open turn can take no message."""
    open_turns = [t for t in await state.store.list_turns(session.id) if t.status in ("running", "awaiting_client")]
    if not open_turns:
        return None
    turn = open_turns[-1]
    if turn.status == "running":
        queued = await state.store.queue_message(session.id, text, refs)
        if queued is not None:
            return SteerOut(turn_id=turn.id, outcome="queued")
        current = await state.store.get_turn(turn.id)
        if current is None or current.status not in ("running", "awaiting_client"):
            return None  # it ended meanwhile
        turn = current
    waiting = await _waiting_calls(state, turn)
    if not waiting or any(not needs_approval for _, needs_approval in waiting):
        raise conflict(f"turn {turn.id} waits for a client tool's result; answer it or cancel the turn "
                       "before sending a message")
    if refs:
        raise conflict(f"turn {turn.id} waits for approvals; images and files cannot be sent as a reason")
    ready = False
    for tool_use_id, _ in waiting:
        ready = await submit_tool_result(state.store, turn.id, tool_use_id, approved=False, reason=text,
                                         on_event=lambda ev: state.bus.publish(session.id, ev))
    if ready:
        await state.turns.resume(session, turn.id)
    return SteerOut(turn_id=turn.id, outcome="denied", tool_use_ids=[c for c, _ in waiting])


async def _waiting_calls(state: AppState, turn: Turn) -> list[tuple[str, bool]]:
    """The turn's tool requests with no answer yet: (call id, whether it asks for approval)."""
    answered = {b.tool_use_id for b in turn.blocks if isinstance(b, ToolResultBlock)}
    asked: dict[str, bool] = {}
    for stored in await state.store.events_after(turn.id, 0):
        if stored.name == ToolRequest.name:
            ev = StoredEvent.event(stored)
            if isinstance(ev, ToolRequest):
                asked[ev.tool_use_id] = ev.requires_approval
        elif stored.name == ToolApproval.name:
            ev = StoredEvent.event(stored)
            if isinstance(ev, ToolApproval):
                answered.add(ev.tool_use_id)
    return [(tid, approval) for tid, approval in asked.items() if tid not in answered]
