"""The AI SDK UI message stream (protocol v1, what ``useChat`` reads), as an encoder over
turn events, and the reading of ``useChat``'s request body.

The stream is SSE with only ``data:`` lines, each one chunk (a JSON object with ``type``),
and ends with ``data: [DONE]``; the response carries ``x-vercel-ai-ui-message-stream: v1``.
Mapping, per turn event:

=================  ====================================================================
``step_start``     ``finish-step`` for the previous step, then ``start-step``
text block         ``text-start`` / ``text-delta`` / ``text-end``
thinking block     ``reasoning-start`` / ``reasoning-delta`` / ``reasoning-end``
tool_use block     ``tool-input-start`` / ``tool-input-delta`` / ``tool-input-available``
tool_result block  ``tool-output-available``, or ``tool-output-error`` when ``is_error``
``error``          ``error``
``turn_complete``  ``finish-step``, ``finish`` (metadata: turn id, status, usage)
=================  ====================================================================

A block that arrives only as ``block_stop`` (replayed from the store) is sent whole: start,
one delta, end. ``step_restart`` closes the open text parts; the step's new parts get new
ids. A client tool's call ends as ``tool-input-available`` without output: the client runs
it and sends the result back in its next request, as a ``tool-<name>`` part in state
``output-available`` (or ``output-error``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.responses import StreamingResponse

from ..blocks import Block, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ..bus import Envelope
from ..events import BlockDelta, BlockStart, BlockStop, ErrorEvent, StepRestart, StepStart, TurnComplete
from .models import UIMessageIn

HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DONE = b"data: [DONE]\n\n"

Chunk = dict[str, Any]


class UIMessageStreamEncoder:
    """Turn events in, UI message chunks out. Pure: no I/O, one instance per response."""

    def __init__(self, *, message_id: str | None = None, metadata: dict[str, Any] | None = None,
                 known_calls: set[str] | None = None) -> None:
        self.message_id = message_id
        self.metadata = metadata
        self._step_open = False
        self._restarts = 0
        self._parts: dict[int, tuple[str, str]] = {}
        """block index -> (kind, part id or tool call id) for parts opened and not ended"""
        self._calls: set[str] = set(known_calls or ())
        self._names: dict[str, str] = {}

    def start(self) -> list[Chunk]:
        chunk: Chunk = {"type": "start"}
        if self.message_id:
            chunk["messageId"] = self.message_id
        if self.metadata is not None:
            chunk["messageMetadata"] = self.metadata
        return [chunk]

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

    def feed(self, env: Envelope) -> list[Chunk]:
        ev = env.event()
        if isinstance(ev, StepStart):
            return [*self._end_step(), *self._ensure_step()]
        if isinstance(ev, BlockStart):
            return self._block_start(ev)
        if isinstance(ev, BlockDelta):
            return self._block_delta(ev)
        if isinstance(ev, BlockStop):
            return self._block_stop(ev.index, ev.block)
        if isinstance(ev, StepRestart):
            out = [self._end(k, pid) for k, pid in self._parts.values() if k in ("text", "reasoning")]
            self._parts.clear()
            self._restarts += 1
            return [c for c in out if c is not None]
        if isinstance(ev, ErrorEvent):
            return [{"type": "error", "errorText": ev.message or ev.code or "error"}]
        if isinstance(ev, TurnComplete):
            meta = {"turn_id": ev.turn_id, "status": ev.status, "stop_reason": ev.stop_reason,
                    "usage": ev.usage.model_dump()}
            return [*self._end_step(), {"type": "finish", "messageMetadata": meta}]
        return []

    def _block_start(self, ev: BlockStart) -> list[Chunk]:
        out = self._ensure_step()
        index, call_id = ev.index, ev.tool_use_id
        if ev.type == "text":
            self._parts[index] = ("text", self._pid(index))
            out.append({"type": "text-start", "id": self._pid(index)})
        elif ev.type == "thinking":
            self._parts[index] = ("reasoning", self._pid(index))
            out.append({"type": "reasoning-start", "id": self._pid(index)})
        elif ev.type == "tool_use" and call_id:
            self._parts[index] = ("tool", call_id)
            self._calls.add(call_id)
            self._names[call_id] = ev.tool_name or ""
            out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": ev.tool_name or ""})
        return out

    def _block_delta(self, ev: BlockDelta) -> list[Chunk]:
        part = self._parts.get(ev.index)
        if part is None:
            return []
        kind, pid = part
        if kind == "tool":
            frag = ev.partial_json
            return [{"type": "tool-input-delta", "toolCallId": pid, "inputTextDelta": frag}] if frag else []
        if not ev.text:
            return []
        return [{"type": f"{kind}-delta", "id": pid, "delta": ev.text}]

    @staticmethod
    def _end(kind: str, pid: str) -> Chunk | None:
        if kind in ("text", "reasoning"):
            return {"type": f"{kind}-end", "id": pid}
        return None

    def _block_stop(self, index: int, block: Block | None) -> list[Chunk]:
        part = self._parts.pop(index, None)
        out: list[Chunk] = []
        if isinstance(block, TextBlock | ThinkingBlock):
            text = block.text if isinstance(block, TextBlock) else block.thinking
            ui = "text" if isinstance(block, TextBlock) else "reasoning"
            if part is None:  # not streamed here: send it whole
                pid = self._pid(index)
                out += self._ensure_step()
                out.append({"type": f"{ui}-start", "id": pid})
                if text:
                    out.append({"type": f"{ui}-delta", "id": pid, "delta": text})
                part = (ui, pid)
            out.append({"type": f"{ui}-end", "id": part[1]})
        elif isinstance(block, ToolUseBlock):
            call_id, tool = block.tool_use_id, block.name
            if part is None:
                out += self._ensure_step()
                out.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": tool})
            self._calls.add(call_id)
            self._names[call_id] = tool
            out.append({"type": "tool-input-available", "toolCallId": call_id, "toolName": tool,
                        "input": block.input or {}})
        elif isinstance(block, ToolResultBlock):
            call_id = block.tool_use_id
            if call_id not in self._calls:
                return out  # its call belongs to a message this stream does not hold
            if block.is_error:
                out.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": block.content})
            else:
                out.append({"type": "tool-output-available", "toolCallId": call_id,
                            "output": _output(block.content)})
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


async def encode_stream(batches: AsyncIterator[list[Envelope] | None],
                        encoder: UIMessageStreamEncoder) -> AsyncIterator[bytes]:
    """One write per batch of events ready together (``Follower.batches``)."""
    start = b"".join([frame(c) for c in encoder.start()])
    if start:
        yield start
    async for batch in batches:
        if batch is None:
            yield b": ping\n\n"
            continue
        if batch[-1].n == 0:  # follow.RECONNECT: the server stops; the stream ends unfinished
            out = b"".join([frame(c) for env in batch[:-1] for c in encoder.feed(env)])
            if out:
                yield out
            return
        out = b"".join([frame(c) for env in batch for c in encoder.feed(env)])
        if out:
            yield out
    yield DONE


def ui_stream_response(batches: AsyncIterator[list[Envelope] | None], encoder: UIMessageStreamEncoder,
                       headers: dict[str, str] | None = None) -> StreamingResponse:
    return StreamingResponse(encode_stream(batches, encoder), media_type="text/event-stream",
                             headers={**HEADERS, **(headers or {})})


# reading useChat's request ------------------------------------------------------------------

def message_text(message: UIMessageIn) -> str:
    return "".join(str(p.get("text", "")) for p in message.parts if p.get("type") == "text")


def tool_part_name(part: dict[str, Any]) -> str | None:
    """The tool name of a tool part (``tool-<name>`` or ``dynamic-tool``), else None."""
    t = str(part.get("type", ""))
    if t.startswith("tool-"):
        return t[len("tool-"):]
    if t == "dynamic-tool":
        return str(part.get("toolName", ""))
    return None


def tool_answers(message: UIMessageIn) -> list[tuple[int, dict[str, Any]]]:
    """(part index, part) of the tool parts the client has an answer for."""
    return [(i, p) for i, p in enumerate(message.parts)
            if tool_part_name(p) is not None and p.get("state") in ("output-available", "output-error")
            and isinstance(p.get("toolCallId"), str)]


def answer_content(part: dict[str, Any]) -> tuple[str, bool]:
    """A tool part's answer as (content, is_error)."""
    if part.get("state") == "output-error":
        return str(part.get("errorText") or "error"), True
    out = part.get("output")
    return (out if isinstance(out, str) else orjson.dumps(out).decode()), False


__all__ = ["DONE", "HEADERS", "UIMessageStreamEncoder", "answer_content", "message_text", "tool_answers",
           "ui_stream_response"]
