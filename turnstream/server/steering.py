"""A message sent while the session's turn is open (docs/steering.md).

The turn waits on questions the user answers yes or no (approvals, a budget's "continue?"):
every waiting call is denied with the message as the reason, the message's images and files
become a ``user`` block of the paused step (after the denials), and the turn goes on: the
model reads the denials, the user's words in them, and what came with them. The turn runs:
the message is queued in the store, where the runner takes it at the next step, whichever
process runs it (``Store.queue_message``; ``queued_messages=next_turn`` makes it start the
next turn instead). A turn that waits for something only the client can give (a client
tool's result, the answer to a tool's question) refuses it with 409 saying what it waits for.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..blocks import Attachment, Session
from ..events import ToolRequest
from ..lifecycle import carry_attachments, pending_requests, submit_tool_result
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
    waiting = list((await pending_requests(state.store, turn)).values())
    if not waiting:
        raise conflict(f"turn {turn.id} has every call answered and is about to go on; send the message "
                       "again in a moment")
    if blocking := [r for r in waiting if not _answerable(r)]:
        raise conflict(f"turn {turn.id} waits for {_awaited(blocking)}; answer "
                       f"{'it' if len(blocking) == 1 else 'them'} or cancel the turn before sending a message")
    ready = False
    for req in waiting:
        ready = await submit_tool_result(state.store, turn.id, req.tool_use_id, approved=False, reason=text,
                                         on_event=lambda ev: state.bus.publish(session.id, ev))
    if refs:
        await carry_attachments(state.store, turn.id, refs, on_event=lambda ev: state.bus.publish(session.id, ev))
    if ready:
        await state.turns.resume(session, turn.id)
    return SteerOut(turn_id=turn.id, outcome="denied", tool_use_ids=[r.tool_use_id for r in waiting])


def _answerable(req: ToolRequest) -> bool:
    """A yes-or-no question a message can answer no to: an approval, or a budget's question."""
    return req.elicitation is None and (req.requires_approval or req.budget is not None)


def _awaited(requests: Sequence[ToolRequest]) -> str:
    """What the client owes the turn, in words: ``the result of client tool get_location``."""
    asked = sorted({r.tool_name for r in requests if r.elicitation is not None})
    ran = sorted({r.tool_name for r in requests if r.elicitation is None})
    said = []
    if ran:
        said.append(f"the result of client tool{'s' if len(ran) > 1 else ''} {', '.join(ran)}")
    if asked:
        said.append(f"your answer to the question of {', '.join(asked)}")
    return " and ".join(said)
