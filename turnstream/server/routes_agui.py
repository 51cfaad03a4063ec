"""``/api/ag-ui``: an AG-UI agent (``HttpAgent``'s ``url``) over turnstream sessions.

``POST /api/ag-ui`` takes AG-UI's ``RunAgentInput`` and streams the run's events
(``agui.py``). The ``threadId`` is the caller's own name for a session (``named_sessions``,
apart from AI SDK chat ids); a new thread takes ``model`` and ``toolset`` from
``forwardedProps``. The thread's history lives on the server, so of ``messages`` a run reads:

* when the thread waits for nothing: the last message, which must be the user's (its text,
  with ``context`` appended, starts a turn; ``tools`` are its client tools);
* when the thread waits: ``tool`` messages that answer its client tools' calls, and
  ``resume`` entries that answer its approval interrupts; together they must answer every
  call it waits for, and the turn goes on in this run. An input that leaves an interrupt
  unanswered, or names one that does not exist, is refused with ``RUN_ERROR`` (AG-UI's rule).
  A new user message while only client tools' calls wait (AG-UI counts that run as
  finished) abandons those calls, with an error result each, and starts the new turn; one
  instead of ``resume`` while only approvals wait denies them with it as the reason, and the
  turn goes on in this run (``steering.py``);
* when the thread's turn runs: a new user message is queued for its next step, and the run
  says so (``RUN_STARTED``, ``CUSTOM`` ``turnstream-steering``, ``RUN_FINISHED``); anything
  else is 409;
* where a new turn goes in the thread's tree (docs/branches.md): the earlier user messages
  are compared with the stored turns (``branch_point``); a history that leaves the branch
  shown (an edited message, or the messages after one dropped) starts the turn after the
  last turn it agrees with, as a new branch: never steering, 409 while a turn is open.

A run streams live; ``X-Turnstream-Steps: whole`` (or ``?steps=whole``) holds each step until
its provider stream has ended (``agui.py``).

``POST /api/ag-ui/{thread_id}/stop`` cancels the thread's open turn (an aborted request does
not: the turn goes on, as for the AI SDK).
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.responses import Response

from ..blocks import Session, Turn, Usage
from ..lifecycle import pending_requests
from .agui import AGUIEncoder, agui_error_response, agui_queued_response, agui_response, steering_event
from .api import API, OVERLOADED, Call, Reply
from .branch_point import Said, branch_point
from .errors import conflict, invalid_field
from .follow import Follower
from .models import TOOLSETS, CancelOut, ClientTool, SteerOut, Toolset
from .models_agui import AguiMessage, AguiResume, RunAgentInputIn
from .named_sessions import open_named_session, open_turn
from .routes_chat import PARAMS, path_name, stop_named
from .routes_turns import client_tool_specs, start_turn, submit
from .steering import steer
from .turn_stream import STEPS_HEADER, STEPS_QUERY, notebook_feed, requested_steps, with_notebook

SSE = "text/event-stream"
CANCELLED_REASON = "The user cancelled this request."


def _text(m: AguiMessage) -> str:
    if isinstance(m.content, str):
        return m.content
    if isinstance(m.content, list):
        return "".join(p.text or "" for p in m.content if p.type == "text")
    return ""


def _props(body: RunAgentInputIn) -> tuple[str | None, Toolset | None]:
    props = body.forwardedProps if isinstance(body.forwardedProps, dict) else {}
    model, toolset = props.get("model"), props.get("toolset")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= 500):
        raise invalid_field(["body", "forwardedProps", "model"], "must be a provider:model string")
    if toolset is not None and toolset not in TOOLSETS:
        raise invalid_field(["body", "forwardedProps", "toolset"], f"must be one of {', '.join(TOOLSETS)}")
    return model, toolset


def _message(body: RunAgentInputIn) -> str:
    """The user's new message: the last one's text, then the run's context."""
    if not body.messages:
        raise invalid_field(["body", "messages"], "a run that starts a turn needs the user's message")
    last, at = body.messages[-1], len(body.messages) - 1
    if last.role != "user":
        raise invalid_field(["body", "messages", at, "role"], "the last message must be the user's (the thread "
                                                              "waits for nothing)")
    text = _text(last)
    if not text.strip():
        raise invalid_field(["body", "messages", at, "content"], "the message has no text")
    if body.context:
        text += "\n\nContext:\n" + "\n".join(f"- {c.description}: {c.value}" for c in body.context)
    return text


def _client_tools(call: Call, session: Session, body: RunAgentInputIn) -> list[dict[str, Any]] | None:
    tools = [ClientTool.model_construct(name=t.name, description=t.description, requires_approval=False,
                                        input_schema=t.parameters or {"type": "object", "properties": {}})
             for t in body.tools]
    return client_tool_specs(call.state, session, tools, field="tools")


async def _answer(call: Call, session: Session, turn: Turn,
                  body: RunAgentInputIn) -> Follower | tuple[str, str] | Literal["new_turn", "steer"]:
    """Answer the waiting turn from the run's input and continue it: its follower; or the
    RUN_ERROR (message, code) AG-UI asks for; or, when the input answers nothing, what its new
    message does: ``new_turn`` when only client tools' calls wait, ``steer`` (deny them with
    it) when only approvals wait and the last message is the user's."""
    state = call.state
    pending = await pending_requests(state.store, turn)
    approvals = {k for k, r in pending.items() if r.executor == "server"}
    clients = {k for k, r in pending.items() if r.executor == "client"}
    outputs: list[tuple[int, AguiMessage]] = []
    for i, m in enumerate(body.messages):
        if m.role == "tool" and m.toolCallId in clients and all(o.toolCallId != m.toolCallId for _, o in outputs):
            outputs.append((i, m))
    entries: list[tuple[int, AguiResume]] = []
    for i, e in enumerate(body.resume or ()):
        if all(f.interruptId != e.interruptId for _, f in entries):
            entries.append((i, e))
    unknown = [e.interruptId for _, e in entries if e.interruptId not in approvals]
    if unknown:
        return f"no open interrupt {', '.join(unknown)} in this thread", "unknown_interrupt"
    if not outputs and not entries:
        if approvals and not clients and body.messages and body.messages[-1].role == "user":
            return "steer"
        if approvals:
            return (f"the thread waits for answers to its interrupts ({', '.join(sorted(approvals))}): send them "
                    "as resume entries"), "interrupts_unanswered"
        return "new_turn"
    missing = sorted((approvals - {e.interruptId for _, e in entries}) | (clients - {m.toolCallId for _, m in outputs}))
    if missing:
        return f"the thread still waits for {', '.join(missing)}; answer every call in one run", "incomplete_answers"
    decisions: list[tuple[int, str, bool, str | None]] = []
    for i, e in entries:
        if e.status == "cancelled":
            decisions.append((i, e.interruptId, False, CANCELLED_REASON))
            continue
        payload = e.payload if isinstance(e.payload, dict) else {}
        approved, reason = payload.get("approved"), payload.get("reason")
        if not isinstance(approved, bool):
            raise invalid_field(["body", "resume", i, "payload", "approved"], "must be true or false")
        if reason is not None and not isinstance(reason, str):
            raise invalid_field(["body", "resume", i, "payload", "reason"], "must be a string")
        decisions.append((i, e.interruptId, approved, reason))
    ready = False
    for i, m in outputs:
        assert m.toolCallId is not None
        content = m.error if m.error is not None else _text(m)
        ready = await submit(state, session, turn, m.toolCallId, content=content, is_error=m.error is not None,
                             approved=None, field_prefix=("body", "messages", i))
    before = await state.store.last_event_n(turn.id)  # denials and approvals are part of the run
    for i, call_id, approved, reason in decisions:
        ready = await submit(state, session, turn, call_id, content=None, is_error=False, approved=approved,
                             reason=reason, field_prefix=("body", "resume", i, "payload"), decided_by=call.user.name)
    if not ready:  # answered by another request meanwhile
        raise conflict(f"turn {turn.id} still waits for other answers")
    follower = Follower(state.store, state.bus, session.id, turn.id, before, ping_interval=state.settings.ping_interval)
    await state.turns.resume(session, turn.id)
    return follower


async def _branch(call: Call, session: Session, body: RunAgentInputIn) -> str | None:
    """The turn the run's new message follows when its history leaves the branch shown
    (``branch_point``: an edited or shortened history; ``ROOT`` for a new first message);
    None: after the current leaf, as before branches."""
    history = [Said(_text(m)) for m in body.messages[:-1] if m.role == "user"]
    if not history or session.current_leaf is None:
        return None
    return branch_point(await call.state.store.list_turns(session.id), session.current_leaf, history)


async def _steer(call: Call, session: Session, turn: Turn, text: str) -> tuple[SteerOut, int] | None:
    """Give the run's new message to the thread's open turn (``steering.py``): what became of
    it, and the turn's last event before the denials it may have made (where this run's
    stream starts); None when the turn ended meanwhile (the message then starts a new one)."""
    before = await call.state.store.last_event_n(turn.id)
    steered = await steer(call.state, session, text, [])
    if steered is None:
        return None
    return steered, before if steered.turn_id == turn.id else 0


@API.route("POST", "/api/ag-ui", summary="AG-UI: RunAgentInput in, the run's events out (a threadId is a session)",
           body=RunAgentInputIn, headers=STEPS_HEADER, query=STEPS_QUERY, params=PARAMS,
           replies={200: Reply("AG-UI events (SSE): RUN_STARTED … RUN_FINISHED or RUN_ERROR.", None, SSE),
                    409: Reply("The thread's turn is open and the run's history leaves the branch shown (a new "
                               "branch is never steered into it), or the run brings no user message while it runs "
                               "(docs/ag-ui.md)."),
                    **OVERLOADED})
async def agui_run(call: Call) -> Response:
    state = call.state
    body = call.parsed(RunAgentInputIn)
    steps = requested_steps(call)
    model, toolset = _props(body)
    title = next((_text(m) for m in body.messages if m.role == "user"), "")
    session = await open_named_session(call, body.threadId, "agui", title=title, model=model, toolset=toolset,
                                       model_field=["body", "forwardedProps", "model"])
    turn = await open_turn(call, session)
    if turn is not None and turn.status == "running" and (not body.messages or body.messages[-1].role != "user"):
        raise conflict(f"turn {turn.id} of this thread is still running; send a user message, wait for it, "
                       "or stop it")
    # The notebook: its changes from now on, then its state (a change in between is in both; the
    # encoder keeps the state's), all before the turn moves, whose first change may come at once.
    feed = notebook_feed(state, session)
    try:
        notebook = await state.notebooks.state(session.id) if feed is not None and state.notebooks else None
        base = Usage()
        follower: Follower | None = None
        lead: list[dict[str, Any]] = []
        answered = await _answer(call, session, turn, body) if turn is not None and turn.status != "running" else None
        if isinstance(answered, tuple):
            if feed is not None:
                feed.close()
            return agui_error_response(body.threadId, body.runId, *answered)
        parent = None if isinstance(answered, Follower) else await _branch(call, session, body)
        if isinstance(answered, Follower):
            assert turn is not None
            follower, base = answered, turn.usage
        elif answered == "new_turn":  # only client tools' calls wait, and a new message comes: they are left
            _message(body)  # a 422 before anything changes
            assert turn is not None
            await state.turns.cancel(session.id, turn.id)
        elif parent is not None:  # the history leaves the branch shown: a new branch, never steering
            _message(body)
        elif turn is not None:  # the turn runs, or waits on approvals only: the message steers it
            steered = await _steer(call, session, turn, _message(body))
            if steered is not None and steered[0].outcome == "queued":
                if feed is not None:
                    feed.close()
                return agui_queued_response(body.threadId, body.runId, steered[0].model_dump(),
                                            {"session_id": session.id, "turn_id": steered[0].turn_id})
            if steered is not None:  # denied: this run streams the turn going on
                follower = Follower(state.store, state.bus, session.id, steered[0].turn_id, steered[1],
                                    ping_interval=state.settings.ping_interval)
                base, lead = turn.usage, [steering_event(steered[0].model_dump())]
        if follower is None:
            follower = await start_turn(state, session, _message(body), _client_tools(call, session, body),
                                        parent_turn_id=parent)
    except BaseException:
        if feed is not None:
            feed.close()
        raise
    encoder = AGUIEncoder(thread_id=body.threadId, run_id=body.runId, model=session.model, base_usage=base,
                          notebook=notebook, metadata={"session_id": session.id, "turn_id": follower.turn_id},
                          messages=[m.model_dump(exclude_unset=True) for m in body.messages], steps=steps, lead=lead)
    return agui_response(with_notebook(follower.batches(), feed), encoder, headers={"X-Turn-Id": follower.turn_id})


@API.route("POST", "/api/ag-ui/{thread_id}/stop",
           summary="Stop an AG-UI thread's open turn (an aborted request does not stop it)", params=PARAMS,
           replies={200: Reply("Cancelled, or being cancelled by the process that runs it.", CancelOut),
                    204: Reply("No turn of this thread is open: nothing to stop.")})
async def agui_stop(call: Call) -> Response:
    return await stop_named(call, path_name(call, "thread_id"), "agui")


__all__ = ["agui_run", "agui_stop"]
