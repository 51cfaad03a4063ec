"""The AI SDK UI message stream (what ``useChat`` reads), as an encoder over turn events, for
the three majors of the ``ai`` package: 5, 6 and 7.

Why one module: the three versions share every chunk but a few, and the few differ inside
the same decisions (what a restarted step sends, when an approval is asked). One encoder
with the version as a parameter keeps each decision in one place; splitting by version
would copy the mapping three times. Reading ``useChat``'s request is in ``aisdk_request.py``.

The stream is SSE with only ``data:`` lines, each one chunk (a JSON object with ``type``),
and ends with ``data: [DONE]``; the response carries ``x-vercel-ai-ui-message-stream: v1``
(all three majors read protocol v1). Mapping, per turn event:

=================  ====================================================================
``step_start``     ``finish-step`` for the previous step, then ``start-step``
text block         ``text-start`` / ``text-delta`` / ``text-end``
thinking block     ``reasoning-start`` / ``reasoning-delta`` / ``reasoning-end``
tool_use block     ``tool-input-start`` / ``tool-input-delta`` / ``tool-input-available``
tool_result block  ``tool-output-available``, or ``tool-output-error`` when ``is_error``;
                   ``tool-output-denied`` (6+) for a call the user denied in the request
``tool_request``   (6+, a server tool that needs approval) ``tool-approval-request`` when
                   the turn pauses; ``approvalId`` is the call's id
``tool_approval``  (7, when the client did not send it) ``tool-approval-request`` and
                   ``tool-approval-response``, so a replayed message shows the decision
``tool_progress``  ``data-tool-progress`` with the call's id (``toolCallId``, ``progress``,
                   ``total``, ``message``), so each report replaces the call's last one
context managed    (the ``context_managed`` event) ``data-turnstream-context``, transient (a
                   notice, not part of the message): what was cleared to fit the model's context
``step_restart``   7: ``reset-step``; 5 and 6: the broken attempt's open parts end (see below)
``error``          ``error``
``turn_complete``  ``finish-step``, ``finish`` (metadata: turn id, status, usage; 6+ adds
                   ``finishReason``)
notebook change    ``data-notebook-cell`` with the cell's id, so a later change of the
                   same cell replaces the part instead of adding one
=================  ====================================================================

A block that arrives only as ``block_stop`` (replayed from the store) is sent whole: start,
one delta, end. A client tool's call ends as ``tool-input-available`` without output: the
client runs it and sends the result back in its next request.

Every version is live: a delta goes out as it arrives. A restarted step (its provider stream
broke and is asked again) must never leave the broken attempt's parts posing as the answer.
Version 7 has ``reset-step``, which removes the current step's parts, and sends it. Versions
5 and 6 cannot take a part back, so the broken attempt's open parts are ended and marked:
``text-end`` / ``reasoning-end`` with ``providerMetadata: {"turnstream": {"discarded": true}}``,
``tool-input-error`` (marked the same way) for a call whose input was streaming, and
``tool-output-error`` for a call whose input was complete; the step then starts again
(``finish-step``, ``start-step``) with parts of new ids. The broken attempt's partial text
stays in the message as its own, finished part, which a client hides by that mark. So that a
block that ended before the break can be marked too, 5 and 6 send a text or reasoning part's
end once the step's stream has ended, not when its block has (its deltas stay live).

``whole`` steps (``turn_stream.requested_steps``) hold each step's parts until the step's
stream has ended (the first event that is not part of it: a tool result, a tool request, the
next step, the end of the turn) and drop them on a restart: nothing is ever taken back, in
any version, at the price of seeing a step's text only when its stream has ended.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
from starlette.responses import StreamingResponse

from ..blocks import Block, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, TurnStatus, TurnStopReason
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
from .turn_stream import Item, StepsMode, in_step_stream

HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DONE = b"data: [DONE]\n\n"
Version = Literal[5, 6, 7]
VERSIONS: tuple[Version, ...] = (5, 6, 7)
NOTEBOOK_PART = "data-notebook-cell"
STEERING_PART = "data-turnstream-steering"
"""A transient data chunk: what became of a message sent while the chat's turn was open
(``steering.py``: queued, or denied the calls waiting for approval)."""
PROGRESS_PART = "data-tool-progress"
"""A running call's progress, one data part per call (its id is the call's)."""
CONTEXT_PART = "data-turnstream-context"
"""A transient data chunk: a request was made smaller to fit the model's context window."""
DISCARDED = {"turnstream": {"discarded": True}}
"""The mark (``providerMetadata``) on the parts of a broken attempt that 5 and 6 cannot remove."""
DISCARDED_CALL = "discarded: the model's stream broke and the step was asked again"

Chunk = dict[str, Any]

def finish_reason(status: TurnStatus, stop: TurnStopReason | None, version: Version) -> str:
    """The AI SDK's finish reason for how a turn (or its stretch) ended."""
    if status == "awaiting_client":
        return "tool-calls"
    if status == "failed":
        return "error"
    if status == "interrupted":
        return "interrupted" if version >= 7 else "error"
    if status == "cancelled":
        return "other"
    return {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
            "refusal": "content-filter"}.get(stop or "", "other")


class UIMessageStreamEncoder:
    """Turn events in, UI message chunks out. Pure: no I/O, one instance per response.

    ``known_calls``: calls whose parts the client's message already has (a continuation);
    ``denied``: calls the client denied in this request (their results become
    ``tool-output-denied``); ``decided``: every call the client approved or denied in this
    request (it holds the decision already, so none is sent back); ``lead``: chunks sent
    before ``start``."""

    def __init__(self, *, version: Version = 5, message_id: str | None = None,
                 metadata: dict[str, Any] | None = None, known_calls: set[str] | None = None,
                 denied: set[str] | None = None, decided: set[str] | None = None,
                 steps: StepsMode = "live", lead: list[Chunk] | None = None) -> None:
        self.version = version
        self.lead = list(lead or ())
        self.steps = steps
        self.message_id = message_id
        self.metadata = metadata
        self._step_open = False
        self._restarts = 0
        self._parts: dict[int, tuple[str, str]] = {}
        """block index -> (kind, part id or tool call id) for parts opened and not ended"""
        self._calls: set[str] = set(known_calls or ())
        self._denied = set(denied or ())
        self._decided = set(decided or ()) | self._denied
        self._asking: dict[str, ToolRequest] = {}
        """Server calls waiting for an approval this stream has not settled yet."""
        self._held: list[Chunk] | None = None
        """``whole`` steps: the chunks of the step whose stream is running (None: not holding)."""
        self._inputs: dict[str, tuple[str, list[str]]] = {}
        """Calls whose input is streaming: call id -> (tool name, input text so far)."""
        self._step_calls: list[str] = []
        """The calls the running attempt of the step has opened (5, 6: ended on a restart)."""
        self._ending: list[tuple[str, str]] = []
        """5, 6 live: text and reasoning parts whose block has ended, (kind, part id): their end
        goes out once the step's stream has, so a restart can still end them marked."""
        self._attempt_sent = False
        """Whether the running attempt of the step has sent a part (5, 6: a restart before
        one goes on in the same step instead of leaving an empty one)."""
        self._restarted_step = 0
        """The step just restarted (7: reset; 5, 6: nothing of the attempt sent), whose next
        ``step_start`` continues it."""

    def start(self) -> list[Chunk]:
        chunk: Chunk = {"type": "start"}
        if self.message_id:
            chunk["messageId"] = self.message_id
        if self.metadata is not None:
            chunk["messageMetadata"] = self.metadata
        return [*self.lead, chunk]

    def _pid(self, index: int) -> str:
        return f"p{self._restarts}-{index}"

    def _ensure_step(self) -> list[Chunk]:
        if self._step_open:
            return []
        self._step_open = True
        return [{"type": "start-step"}]

    def _end_step(self) -> list[Chunk]:
        if not self._step_open:
            return []
        self._step_open = False
        return [{"type": "finish-step"}]

    # the step's stream, held or not ---------------------------------------------------------
    def _stream_part(self, chunks: list[Chunk]) -> list[Chunk]:
        """Chunks of the running step: held (``whole`` steps) or sent."""
        if self._held is None:
            return chunks
        self._held += chunks
        return []

    def _release(self) -> list[Chunk]:
        held, self._held = self._held, None
        return held or []

    def feed(self, env: Envelope) -> list[Chunk]:
        ev = env.event()
        in_stream = in_step_stream(ev)
        if self._held is not None and in_stream:
            return self._stream_part(self._event(ev))
        if isinstance(ev, StepRestart):
            return self._restart()
        out = self._release()
        if not in_stream:  # the step's stream has ended: its texts are final
            ending, self._ending = self._ending, []
            out += [{"type": f"{kind}-end", "id": pid} for kind, pid in ending]
        if isinstance(ev, StepStart) and self.steps == "whole":
            out += self._end_step()
            self._step_calls = []
            self._held = []
            return out + self._stream_part(self._ensure_step())
        return out + self._event(ev)

    def _restart(self) -> list[Chunk]:
        open_parts, self._parts = self._parts, {}
        self._restarts += 1
        calls, self._step_calls = self._step_calls, []
        for call_id in calls:  # the broken attempt's calls: no result or approval will follow
            self._calls.discard(call_id)
            self._asking.pop(call_id, None)
        if self._held is not None:
            # Nothing of the broken attempt was sent: forget it, and the step with it
            # (its start-step was held too); the step's next start opens it again.
            self._held = None
            self._step_open = False
            self._inputs.clear()
            return []
        if self.version >= 7:
            self._inputs.clear()
            self._restarted_step = 1
            return [{"type": "reset-step"}] if self._step_open else []
        if not self._attempt_sent:
            self._restarted_step = 1
            return []
        ending = [*self._ending, *((k, p) for k, p in open_parts.values() if k != "tool")]
        self._ending = []
        out: list[Chunk] = [{"type": f"{kind}-end", "id": pid, "providerMetadata": DISCARDED} for kind, pid in ending]
        for call_id in calls:
            streaming = self._inputs.pop(call_id, None)
            if streaming is None:  # its input was complete: the call gets an error as its output
                out.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": DISCARDED_CALL})
            else:
                out.append({"type": "tool-input-error", "toolCallId": call_id, "toolName": streaming[0],
                            "input": "".join(streaming[1]), "errorText": DISCARDED_CALL,
                            "providerMetadata": DISCARDED})
        return out

    def _event(self, ev: Any) -> list[Chunk]:
        if isinstance(ev, StepStart):
            self._step_calls = []
            self._attempt_sent = False
            if self._restarted_step:
                self._restarted_step = 0
                return self._ensure_step()  # the same step again: reset-step kept its start
            return [*self._end_step(), *self._ensure_step()]
        if isinstance(ev, BlockStart | BlockStop):
            parts = self._block_start(ev) if isinstance(ev, BlockStart) else self._block_stop(ev.index, ev.block)
            self._attempt_sent = self._attempt_sent or bool(parts)
            return parts
        if isinstance(ev, BlockDelta):
            return self._block_delta(ev)
        if isinstance(ev, ToolRequest):
            if self.version >= 6 and ev.executor == "server" and ev.tool_use_id not in self._decided:
                self._asking[ev.tool_use_id] = ev
            return []
        if isinstance(ev, ToolApproval):
            req = self._asking.pop(ev.tool_use_id, None)
            if req is None or self.version < 7:
                return []
            return [self._approval_request(req), {"type": "tool-approval-response", "approvalId": req.tool_use_id,
                                                  "approved": True}]
        if isinstance(ev, ToolProgress):
            return [{"type": PROGRESS_PART, "id": ev.tool_use_id,
                     "data": {"toolCallId": ev.tool_use_id, "progress": ev.progress, "total": ev.total,
                              "message": ev.message}}]
        if isinstance(ev, ContextManaged):
            return [{"type": CONTEXT_PART, "transient": True, "data": ev.data()}]
        if isinstance(ev, ErrorEvent):
            return [{"type": "error", "errorText": ev.message or ev.code or "error"}]
        if isinstance(ev, TurnComplete):
            return self._complete(ev)
        return []

    def _approval_request(self, req: ToolRequest) -> Chunk:
        chunk: Chunk = {"type": "tool-approval-request", "approvalId": req.tool_use_id, "toolCallId": req.tool_use_id}
        if req.note and self.version >= 7:
            chunk["reason"] = req.note
        return chunk

    def _complete(self, ev: TurnComplete) -> list[Chunk]:
        out: list[Chunk] = []
        if ev.status == "awaiting_client":
            out += [self._approval_request(r) for r in self._asking.values() if r.tool_use_id in self._calls]
        self._asking.clear()
        meta = {"turn_id": ev.turn_id, "status": ev.status, "stop_reason": ev.stop_reason,
                "usage": ev.usage.model_dump()}
        finish: Chunk = {"type": "finish"}
        if self.version >= 6:
            finish["finishReason"] = finish_reason(ev.status, ev.stop_reason, self.version)
        finish["messageMetadata"] = meta
        return [*out, *self._end_step(), finish]

    def note(self, message: dict[str, Any]) -> list[Chunk]:
        """A notebook change (``NotebookManager``'s message) as a data part keyed by its cell."""
        cell = message.get("cell")
        if not isinstance(cell, dict) or not isinstance(cell.get("id"), str):
            return []
        data = {"change": message.get("change"), "version": message.get("version"), "cell": cell}
        if message.get("truncated"):
            data["truncated"] = True  # too large to travel between processes: outputs left out
        return [{"type": NOTEBOOK_PART, "id": cell["id"], "data": data}]

    # blocks ---------------------------------------------------------------------------------
    def _block_start(self, ev: BlockStart) -> list[Chunk]:
        if ev.type == "tool_result":
            return []  # its output refers to its call's part, wherever that is: no step of its own
        out = self._ensure_step()
        index, call_id = ev.index, ev.tool_use_id
        if ev.type == "text":
            self._parts[index] = ("text", self._pid(index))
            out.append({"type": "text-start", "id": self._pid(index), **self._agent(ev.agent)})
        elif ev.type == "thinking":
            self._parts[index] = ("reasoning", self._pid(index))
            out.append({"type": "reasoning-start", "id": self._pid(index), **self._agent(ev.agent)})
        elif ev.type == "tool_use" and call_id:
            self._parts[index] = ("tool", call_id)
            self._calls.add(call_id)
            self._step_calls.append(call_id)
            self._inputs[call_id] = (ev.tool_name or "", [])
            out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": ev.tool_name or "",
                        **(self._agent(ev.agent) if self.version >= 6 else {})})
        return out

    @staticmethod
    def _agent(agent: str | None) -> Chunk:
        """The part's agent, in a session of several (``providerMetadata.turnstream.agent``)."""
        return {"providerMetadata": {"turnstream": {"agent": agent}}} if agent else {}

    def _block_delta(self, ev: BlockDelta) -> list[Chunk]:
        part = self._parts.get(ev.index)
        if part is None:
            return []
        kind, pid = part
        if kind == "tool":
            frag = ev.partial_json
            if not frag:
                return []
            streaming = self._inputs.get(pid)
            if streaming is not None:
                streaming[1].append(frag)
            return [{"type": "tool-input-delta", "toolCallId": pid, "inputTextDelta": frag}]
        if not ev.text:
            return []
        return [{"type": f"{kind}-delta", "id": pid, "delta": ev.text}]

    def _block_stop(self, index: int, block: Block | None) -> list[Chunk]:
        part = self._parts.pop(index, None)
        out: list[Chunk] = []
        if isinstance(block, TextBlock | ThinkingBlock):
            text = block.text if isinstance(block, TextBlock) else block.thinking
            ui = "text" if isinstance(block, TextBlock) else "reasoning"
            if part is None:  # not streamed here: send it whole
                pid = self._pid(index)
                out += self._ensure_step()
                out.append({"type": f"{ui}-start", "id": pid, **self._agent(block.agent)})
                if text:
                    out.append({"type": f"{ui}-delta", "id": pid, "delta": text})
                part = (ui, pid)
            if self.version < 7 and self.steps == "live":
                self._ending.append(part)  # ended once the step's stream has (see ``feed``)
            else:
                out.append({"type": f"{ui}-end", "id": part[1]})
        elif isinstance(block, ToolUseBlock):
            call_id, tool = block.tool_use_id, block.name
            if part is None:
                out += self._ensure_step()
                out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": tool,
                            **(self._agent(block.agent) if self.version >= 6 else {})})
                self._step_calls.append(call_id)
            self._inputs.pop(call_id, None)
            self._calls.add(call_id)
            out.append({"type": "tool-input-available", "toolCallId": call_id, "toolName": tool,
                        "input": block.input or {}})
        elif isinstance(block, ToolResultBlock):
            out += self._result(block)
        return out

    def _result(self, block: ToolResultBlock) -> list[Chunk]:
        call_id = block.tool_use_id
        if call_id not in self._calls:
            return []  # its call belongs to a message this stream does not hold
        asked = self._asking.pop(call_id, None)
        if self.version >= 6 and block.is_error and call_id in self._denied:
            return [{"type": "tool-output-denied", "toolCallId": call_id}]
        if block.is_error:
            return [{"type": "tool-output-error", "toolCallId": call_id, "errorText": block.content}]
        out: list[Chunk] = []
        if asked is not None and self.version >= 7:  # approved elsewhere, and not announced yet
            out += [self._approval_request(asked),
                    {"type": "tool-approval-response", "approvalId": call_id, "approved": True}]
        out.append({"type": "tool-output-available", "toolCallId": call_id, "output": _output(block.content)})
        return out


def _output(content: str) -> Any:
    """A tool's text result; JSON results go out parsed, as the AI SDK's own tools do."""
    if content[:1] in ("{", "["):
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
    return content


def frame(chunk: Chunk) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


async def encode_stream(items: AsyncIterator[Item], encoder: UIMessageStreamEncoder) -> AsyncIterator[bytes]:
    """One write per batch of events ready together (``Follower.batches``), and one per
    notebook change."""
    start = b"".join([frame(c) for c in encoder.start()])
    if start:
        yield start
    async for item in items:
        if item is None:
            yield b": ping\n\n"
            continue
        if isinstance(item, dict):
            out = b"".join([frame(c) for c in encoder.note(item)])
        elif item[-1].name == Reconnect.name:  # the server stops; the stream ends unfinished
            out = b"".join([frame(c) for env in item[:-1] for c in encoder.feed(env)])
            if out:
                yield out
            return
        else:
            out = b"".join([frame(c) for env in item for c in encoder.feed(env)])
        if out:
            yield out
    yield DONE


def chunks_response(chunks: list[Chunk]) -> StreamingResponse:
    """A UI message stream of the given chunks only (no message), then ``[DONE]``."""
    async def body() -> AsyncIterator[bytes]:
        yield b"".join([frame(c) for c in chunks]) + DONE
    return StreamingResponse(body(), media_type="text/event-stream", headers=HEADERS)


def ui_stream_response(items: AsyncIterator[Item], encoder: UIMessageStreamEncoder,
                       headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(encode_stream(items, encoder), media_type="text/event-stream",
                             headers={**HEADERS, **(headers or {})})


__all__ = ["CONTEXT_PART", "DISCARDED", "DONE", "HEADERS", "NOTEBOOK_PART", "PROGRESS_PART", "STEERING_PART",
           "VERSIONS", "UIMessageStreamEncoder", "Version", "chunks_response", "finish_reason", "frame",
           "ui_stream_response"]
