"""The AG-UI event stream (protocol 1.0, what ``@ag-ui/client``'s ``HttpAgent`` reads), as an
encoder over turn events: a sibling of the AI SDK encoder, reading the same events.

One run is one stretch of a turn: from the request to the turn's end or its next pause. The
stream is SSE, one event per ``data:`` line. Mapping, per turn event:

=================  ====================================================================
(first)            ``RUN_STARTED`` (``metadata``: ``session_id``, ``turn_id``); the ``lead``
                   (a steering outcome, ``CUSTOM``); ``STATE_SNAPSHOT`` of the notebook when
                   the session has one
``step_start``     ``STEP_FINISHED`` for the previous step, ``STEP_STARTED`` (``step N``)
text block         ``TEXT_MESSAGE_START`` (role ``assistant``) / ``_CONTENT`` / ``_END``
thinking block     ``REASONING_START``, ``REASONING_MESSAGE_START`` / ``_CONTENT`` / ``_END``,
                   ``REASONING_END``
tool_use block     ``TOOL_CALL_START`` / ``TOOL_CALL_ARGS`` (the model's own fragments) /
                   ``TOOL_CALL_END``
tool_result block  ``TOOL_CALL_RESULT`` (role ``tool``; a denial's too, with its text)
``tool_progress``  ``CUSTOM`` ``turnstream-tool-progress`` (``toolCallId``, ``progress``,
                   ``total``, ``message``)
context managed    (the ``context_managed`` event) ``CUSTOM`` ``turnstream-context`` with the
                   event's payload: what was cleared to fit the model's context
notebook change    ``STATE_DELTA``: a JSON Patch on ``/notebook/cells/<index>`` and
                   ``/notebook/version``
``error``          ``RUN_ERROR`` (code and message), which ends the run
``turn_complete``  ``RUN_FINISHED`` with its outcome: ``success`` (with the client tools'
                   calls left to answer as ``pendingToolCallIds``), ``interrupt`` (one
                   interrupt per server tool waiting for approval), ``cancelled``; a failed
                   or interrupted turn is ``RUN_ERROR``. ``usage`` counts this run only.
=================  ====================================================================

Client tools and approvals follow AG-UI 1.0: a run that stopped on a frontend tool call
(a tool of ``RunAgentInput.tools``) finished as ``success`` and names the calls in
``pendingToolCallIds``; the next run's ``tool`` messages answer them. A run that waits for
an approval finishes with the ``interrupt`` outcome; each interrupt's id is the call's id,
``reason`` is ``tool_call``, and the next run's ``resume`` entries answer them
(``{"approved": bool, "reason"?: str}``, or status ``cancelled`` for a denial).

A run is live: each delta goes out as it arrives. A restarted step (its provider stream
broke and is asked again) ends what the broken attempt left open (``TEXT_MESSAGE_END``,
``REASONING_MESSAGE_END`` and ``REASONING_END``, ``TOOL_CALL_END``), then sends
``MESSAGES_SNAPSHOT`` with the thread's true messages: the run's input messages and what the
run has produced before the broken attempt, built as ``@ag-ui/client`` builds them from the
events (a text or reasoning message per block, an assistant message per tool call whose id is
the call's, a tool message per result, placed after its call). A client replaces its
messages with the snapshot, so the broken attempt's messages go; the step starts again
(``STEP_FINISHED``, ``STEP_STARTED``) with messages of new ids.

``whole`` steps (``turn_stream.requested_steps``) hold a step's events until its stream has
ended and drop them on a ``step_restart``: no snapshot, and nothing sent is taken back.

Why one module of this size: the encoder is one state machine over a turn's events (which
messages are open, what a restart must close); the responses below are the only ways out of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.responses import StreamingResponse

from ..blocks import Block, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Usage
from ..bus import Envelope
from ..events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    ContextManaged,
    ErrorEvent,
    Reconnect,
    StepRestart,
    StepStart,
    ToolApproval,
    ToolProgress,
    ToolRequest,
    TurnComplete,
)
from .agui_messages import ClientMessages
from .turn_stream import Item, StepsMode, in_step_stream

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
APPROVAL_SCHEMA = {"type": "object", "required": ["approved"],
                   "properties": {"approved": {"type": "boolean"},
                                  "reason": {"type": "string", "description": "Why, when denied."}}}
"""What an approval interrupt expects as its resume entry's ``payload``."""
STEERING_EVENT = "turnstream-steering"
"""The ``CUSTOM`` event's ``name`` for a message that steered the thread's open turn."""
PROGRESS_EVENT = "turnstream-tool-progress"
"""The ``CUSTOM`` event's ``name`` for a running call's progress."""
CONTEXT_EVENT = "turnstream-context"
"""The ``CUSTOM`` event's ``name`` for a request made smaller to fit the model's context."""

Ev = dict[str, Any]


def token_usage(usage: Usage, model: str, base: Usage | None = None) -> list[Ev]:
    """Our usage (less ``base``, what earlier runs of the turn spent) as AG-UI counts it:
    ``inputTokens`` includes cache reads and writes."""
    b = base or Usage()
    read = usage.cache_read_input_tokens - b.cache_read_input_tokens
    write = usage.cache_creation_input_tokens - b.cache_creation_input_tokens
    total_in = usage.input_tokens - b.input_tokens + read + write
    out = usage.output_tokens - b.output_tokens
    return [{"model": model, "inputTokens": total_in, "outputTokens": out, "totalTokens": total_in + out,
             "cachedInputTokens": read, "cacheWriteInputTokens": write}]


class AGUIEncoder:
    """Turn events in, AG-UI events out. Pure: no I/O, one instance per run.

    ``base_usage``: the turn's usage before this run (a run that resumes counts only its own
    calls); ``notebook``: the notebook's state (``NotebookManager.state``) when the session
    has one; ``metadata``: what ``RUN_STARTED`` carries (the session and turn ids, for the
    session routes); ``messages``: the run's input messages, as the client sent them (the
    start of a ``MESSAGES_SNAPSHOT``); ``steps``: ``live`` or ``whole``; ``lead``: events sent
    right after ``RUN_STARTED`` (a steering outcome)."""

    def __init__(self, *, thread_id: str, run_id: str, model: str, base_usage: Usage | None = None,
                 notebook: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None,
                 messages: list[Ev] | None = None, steps: StepsMode = "live", lead: list[Ev] | None = None) -> None:
        self.metadata = metadata
        self.lead = lead or []
        self.thread_id = thread_id
        self.run_id = run_id
        self.model = model
        self.base_usage = base_usage or Usage()
        self.ended = False
        """A terminal event (``RUN_FINISHED`` / ``RUN_ERROR``) went out: nothing follows it."""
        self._cells: list[str] | None = None
        """The cell ids of the notebook state the client holds, in order."""
        self._notebook = notebook
        self._version: Any = None
        """The notebook version the client's state is at."""
        self._step = 0
        self._restarts = 0
        self._open: dict[int, tuple[str, str]] = {}
        """block index -> (kind, message or call id) for what is open and not ended"""
        self.steps = steps
        self._held: list[Ev] | None = None
        """``whole`` steps: the events of the step whose stream is running (None: not holding)."""
        self._messages = ClientMessages(messages)
        self._approvals: dict[str, ToolRequest] = {}
        self._client_calls: dict[str, None] = {}
        """Client tools' calls of this run without a result, in call order."""

    # the run -------------------------------------------------------------------------------
    def start(self) -> list[Ev]:
        started: Ev = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}
        if self.metadata is not None:
            started["metadata"] = self.metadata
        out = [started, *self.lead]
        if self._notebook is not None:
            out.append(self._snapshot(self._notebook))
        return out

    def error(self, message: str, code: str) -> list[Ev]:
        """``RUN_ERROR``, after closing what is open (the run ends here)."""
        if self.ended:
            return []
        self.ended = True
        return [*self._close_all(), {"type": "RUN_ERROR", "message": message, "code": code}]

    def feed(self, env: Envelope) -> list[Ev]:
        if self.ended:
            return []
        ev = env.event()
        if self._held is not None and in_step_stream(ev):
            self._held += self._event(ev)
            return []
        if isinstance(ev, StepRestart):
            return self._restart()
        out, self._held = self._held or [], None
        if isinstance(ev, StepStart):
            out += self._step_finished()
            self._step = ev.step
            self._messages.mark()
            started = [{"type": "STEP_STARTED", "stepName": f"step {ev.step}"}]
            if self.steps == "whole":
                self._held = started
                return out
            return out + started
        return out + self._event(ev)

    def _restart(self) -> list[Ev]:
        self._restarts += 1
        for call_id in self._messages.drop_step():  # the broken attempt's calls: no result or answer follows
            self._client_calls.pop(call_id, None)
            self._approvals.pop(call_id, None)
        if self._held is not None:
            self._held = None  # nothing of the broken attempt was sent, its STEP_STARTED neither
            self._open.clear()
            self._step = 0
            return []
        out: list[Ev] = []
        for kind, mid in self._open.values():
            out += self._end(kind, mid)
        self._open.clear()
        return [*out, {"type": "MESSAGES_SNAPSHOT", "messages": self._messages.snapshot()}]

    def _step_finished(self) -> list[Ev]:
        if not self._step:
            return []
        step, self._step = self._step, 0
        return [{"type": "STEP_FINISHED", "stepName": f"step {step}"}]

    def _close_all(self) -> list[Ev]:
        out: list[Ev] = []
        for kind, mid in self._open.values():
            out += self._end(kind, mid)
        self._open.clear()
        return out + self._step_finished()

    def _event(self, ev: Any) -> list[Ev]:
        if isinstance(ev, BlockStart):
            return self._block_start(ev)
        if isinstance(ev, BlockDelta):
            return self._block_delta(ev)
        if isinstance(ev, BlockStop):
            return self._block_stop(ev.index, ev.block)
        if isinstance(ev, ToolRequest):
            if ev.executor == "server":
                self._approvals[ev.tool_use_id] = ev
            else:
                self._client_calls[ev.tool_use_id] = None
            return []
        if isinstance(ev, ToolApproval):
            self._approvals.pop(ev.tool_use_id, None)
            return []
        if isinstance(ev, ToolProgress):
            return [{"type": "CUSTOM", "name": PROGRESS_EVENT, "value": {
                "toolCallId": ev.tool_use_id, "progress": ev.progress, "total": ev.total, "message": ev.message}}]
        if isinstance(ev, ContextManaged):
            return [{"type": "CUSTOM", "name": CONTEXT_EVENT, "value": ev.data()}]
        if isinstance(ev, ErrorEvent):
            return self.error(ev.message or ev.code, ev.code)
        if isinstance(ev, TurnComplete):
            return self._complete(ev)
        return []

    def _complete(self, ev: TurnComplete) -> list[Ev]:
        if ev.status in ("failed", "interrupted"):
            return self.error(f"the turn ended {ev.status} ({ev.stop_reason})", ev.status)
        out = self._close_all()
        outcome: Ev
        if ev.status == "cancelled":
            outcome = {"type": "cancelled"}
        elif ev.status == "awaiting_client" and self._approvals:
            outcome = {"type": "interrupt", "interrupts": [self._interrupt(r) for r in self._approvals.values()]}
        else:
            outcome = {"type": "success"}
            if ev.status == "awaiting_client" and self._client_calls:
                outcome["pendingToolCallIds"] = list(self._client_calls)
        self.ended = True
        return [*out, {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": outcome,
                       "usage": token_usage(ev.usage, self.model, self.base_usage)}]

    @staticmethod
    def _interrupt(req: ToolRequest) -> Ev:
        message = req.note or f"Allow {req.tool_name} with {orjson.dumps(req.input).decode()}?"
        return {"id": req.tool_use_id, "reason": "tool_call", "toolCallId": req.tool_use_id, "message": message,
                "responseSchema": APPROVAL_SCHEMA}

    # blocks ------------------------------------------------------------------------------------
    def _mid(self, index: int) -> str:
        return f"{self.run_id}-{self._restarts}-{index}"

    def _open_part(self, kind: str, index: int, call_id: str | None = None, name: str = "",
                   agent: str | None = None) -> list[Ev]:
        """``agent``: who speaks, in a session of several agents (a text message's ``name``)."""
        if kind == "tool" and call_id:
            self._open[index] = ("tool", call_id)
            self._messages.call(call_id, name)
            return [{"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}]
        mid = self._mid(index)
        self._open[index] = (kind, mid)
        self._messages.text(mid, "assistant" if kind == "text" else "reasoning", agent if kind == "text" else None)
        if kind == "text":
            return [{"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant", **({"name": agent} if agent
                                                                                            else {})}]
        return [{"type": "REASONING_START", "messageId": mid},
                {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}]

    def _content(self, kind: str, mid: str, text: str) -> list[Ev]:
        if not text:
            return []
        self._messages.content(kind, mid, text)
        if kind == "tool":
            return [{"type": "TOOL_CALL_ARGS", "toolCallId": mid, "delta": text}]
        name = "TEXT_MESSAGE_CONTENT" if kind == "text" else "REASONING_MESSAGE_CONTENT"
        return [{"type": name, "messageId": mid, "delta": text}]

    @staticmethod
    def _end(kind: str, mid: str) -> list[Ev]:
        if kind == "tool":
            return [{"type": "TOOL_CALL_END", "toolCallId": mid}]
        if kind == "text":
            return [{"type": "TEXT_MESSAGE_END", "messageId": mid}]
        return [{"type": "REASONING_MESSAGE_END", "messageId": mid}, {"type": "REASONING_END", "messageId": mid}]

    def _block_start(self, ev: BlockStart) -> list[Ev]:
        if ev.type == "text":
            return self._open_part("text", ev.index, agent=ev.agent)
        if ev.type == "thinking":
            return self._open_part("reasoning", ev.index)
        if ev.type == "tool_use" and ev.tool_use_id:
            return self._open_part("tool", ev.index, ev.tool_use_id, ev.tool_name or "")
        return []

    def _block_delta(self, ev: BlockDelta) -> list[Ev]:
        part = self._open.get(ev.index)
        if part is None:
            return []
        kind, mid = part
        return self._content(kind, mid, (ev.partial_json if kind == "tool" else ev.text) or "")

    def _block_stop(self, index: int, block: Block | None) -> list[Ev]:
        part = self._open.pop(index, None)
        if isinstance(block, TextBlock | ThinkingBlock | ToolUseBlock):
            out: list[Ev] = []
            if part is None:  # not streamed here (replayed from the store): send it whole
                if isinstance(block, ToolUseBlock):
                    out += self._open_part("tool", index, block.tool_use_id, block.name)
                    text = block.raw_input if block.raw_input is not None else orjson.dumps(block.input).decode()
                else:
                    out += self._open_part("text" if isinstance(block, TextBlock) else "reasoning", index,
                                           agent=block.agent)
                    text = block.text if isinstance(block, TextBlock) else block.thinking
                part = self._open.pop(index)
                out += self._content(part[0], part[1], text)
            return out + self._end(*part)
        if isinstance(block, ToolResultBlock):
            call_id, mid = block.tool_use_id, f"result-{block.tool_use_id}"
            self._client_calls.pop(call_id, None)
            self._approvals.pop(call_id, None)
            self._messages.result(mid, call_id, block.content)
            return [{"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": call_id, "content": block.content,
                     "role": "tool"}]
        return []

    # the notebook as the run's state ------------------------------------------------------------
    def _snapshot(self, state: dict[str, Any]) -> Ev:
        cells = [c for c in state.get("cells", []) if isinstance(c, dict)]
        self._cells = [str(c.get("id")) for c in cells]
        self._version = state.get("version")
        notebook = {"version": state.get("version"), "cells": cells, "sandbox": state.get("sandbox")}
        return {"type": "STATE_SNAPSHOT", "snapshot": {"notebook": notebook}}

    def note(self, message: dict[str, Any]) -> list[Ev]:
        """A notebook change (``NotebookManager``'s message) as a JSON Patch on the state the
        client holds. Changes before the first snapshot, or to a cell it does not know, are
        left out: the client's state did not start from ours."""
        cell, cells, version = message.get("cell"), self._cells, message.get("version")
        if self.ended or cells is None or not isinstance(cell, dict) or not isinstance(cell.get("id"), str):
            return []
        if isinstance(version, int) and isinstance(self._version, int) and version <= self._version:
            return []  # already in the snapshot the client holds
        self._version = version
        cid, change = cell["id"], message.get("change")
        if message.get("truncated"):
            cell = {**cell, "truncated": True}  # too large to travel between processes: outputs left out
        ops: list[Ev]
        if change == "cell_created":
            at = message.get("index")
            at = at if isinstance(at, int) and 0 <= at <= len(cells) else len(cells)
            cells.insert(at, cid)
            ops = [{"op": "add", "path": f"/notebook/cells/{at}", "value": cell}]
        elif cid not in cells:
            return []
        elif change == "cell_deleted":
            at = cells.index(cid)
            cells.pop(at)
            ops = [{"op": "remove", "path": f"/notebook/cells/{at}"}]
        else:
            ops = [{"op": "replace", "path": f"/notebook/cells/{cells.index(cid)}", "value": cell}]
        ops.append({"op": "replace", "path": "/notebook/version", "value": version})
        return [{"type": "STATE_DELTA", "delta": ops}]


def frame(ev: Ev) -> bytes:
    return b"data: " + orjson.dumps(ev) + b"\n\n"


async def encode_stream(items: AsyncIterator[Item], encoder: AGUIEncoder) -> AsyncIterator[bytes]:
    """One write per batch of events ready together, and one per notebook change."""
    yield b"".join([frame(e) for e in encoder.start()])
    async for item in items:
        if item is None:
            yield b": ping\n\n"
            continue
        if isinstance(item, dict):
            out = encoder.note(item)
        elif item[-1].name == Reconnect.name:  # this server stops; the run goes on elsewhere
            out = [e for env in item[:-1] for e in encoder.feed(env)]
            out += encoder.error("the server is stopping; the run goes on in another process, and its "
                                 "outcome is in the thread's next run", "server_stopping")
        else:
            out = [e for env in item for e in encoder.feed(env)]
        if out:
            yield b"".join(frame(e) for e in out)
        if encoder.ended:
            return


async def _only(events: list[Ev]) -> AsyncIterator[bytes]:
    yield b"".join(frame(e) for e in events)


def agui_response(items: AsyncIterator[Item], encoder: AGUIEncoder,
                  headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(encode_stream(items, encoder), media_type="text/event-stream",
                             headers={**HEADERS, **(headers or {})})


def agui_error_response(thread_id: str, run_id: str, message: str, code: str) -> StreamingResponse:
    """A run refused by the protocol's own rules (e.g. an interrupt left unanswered): AG-UI
    says so with ``RUN_ERROR`` in the stream, not with an HTTP status."""
    events = [{"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
              {"type": "RUN_ERROR", "message": message, "code": code}]
    return StreamingResponse(_only(events), media_type="text/event-stream", headers=HEADERS)


def steering_event(outcome: dict[str, Any]) -> Ev:
    """What became of a message sent while the thread's turn ran or waited (``SteerOut``), as
    the ``CUSTOM`` event a run opens with."""
    return {"type": "CUSTOM", "name": STEERING_EVENT, "value": outcome}


def agui_queued_response(thread_id: str, run_id: str, outcome: dict[str, Any],
                         metadata: dict[str, Any]) -> StreamingResponse:
    """The whole run of a message queued for the running turn: it started, says so, and
    finished; the run that follows the turn streams what the model makes of it."""
    events = [{"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "metadata": metadata},
              steering_event(outcome),
              {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "outcome": {"type": "success"}}]
    return StreamingResponse(_only(events), media_type="text/event-stream",
                             headers={**HEADERS, "X-Turn-Id": str(outcome["turn_id"])})


__all__ = ["APPROVAL_SCHEMA", "PROGRESS_EVENT", "STEERING_EVENT", "AGUIEncoder", "agui_error_response",
           "agui_queued_response", "agui_response", "steering_event", "token_usage"]
