"""Fragments to blocks: the one place that assembles a step's stream.

The ``Assembler`` receives the neutral events of one step (``providers/base.py``), keyed by
the vendor's index or id, and returns the SPEC §8 stream events with turn-wide block
indexes (the block's ``seq``). Tool input is kept as raw text and parsed once, on the
block's end signal; a live best-effort parse (``BlockDelta.input``) is taken only when
``snapshots`` is on, at geometrically spaced sizes (every fragment up to 1 KiB, then each
time the input has grown by a quarter), so the total work stays linear in the input. With
``snapshots`` off (nobody follows the turn live: ``RunConfig.live_deltas``) a delta is only
kept, and no ``BlockDelta`` is made for it.

``partial_blocks()`` gives a consistent view of what is open at any moment: that is what
a cancelled or broken step keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from .blocks import (
    Block,
    ProviderBlock,
    RedactedThinkingBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from .errors import ProviderProtocolError
from .events import BlockDelta, BlockStart, BlockStop
from .json_depth import MAX_DEPTH, too_deep
from .partial_json import PartialJSON
from .providers.base import BlockClosed, BlockOpened, Delta, ProviderEvent, StepEnded

_SNAPSHOT_EVERY_FRAGMENT_BELOW = 1024
_SNAPSHOT_GROWTH = 1.25


@dataclass(slots=True)
class _Open:
    seq: int
    kind: str
    parts: list[str] = field(default_factory=list)
    signature: str = ""
    tool_use_id: str | None = None
    name: str | None = None
    data: dict[str, Any] | None = None
    json: PartialJSON | None = None
    next_snapshot: int = 0
    citations: list[dict[str, Any]] | None = None


class Assembler:
    __slots__ = (
        "_next_seq",
        "_open",
        "_taken",
        "finished",
        "origin",
        "provider",
        "raw_stop_reason",
        "snapshots",
        "step",
        "stop_reason",
        "usage",
    )

    def __init__(self, *, step: int, first_seq: int, origin: str, provider: str, snapshots: bool = True,
                 taken_ids: set[str] | None = None) -> None:
        self.step = step
        self._next_seq = first_seq
        self.origin = origin
        self.provider = provider
        self.snapshots = snapshots
        self._open: dict[int | str, _Open] = {}
        self.finished: list[Block] = []
        self.stop_reason: StopReason | None = None
        self.raw_stop_reason: str | None = None
        self.usage = Usage()
        self._taken = taken_ids if taken_ids is not None else set()

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def ended(self) -> bool:
        """True once the provider's final event arrived."""
        return self.stop_reason is not None

    def feed(self, ev: ProviderEvent) -> BlockStart | BlockDelta | BlockStop | None:
        if type(ev) is Delta:
            return self._delta(ev)
        if type(ev) is BlockOpened:
            return self._opened(ev)
        if type(ev) is BlockClosed:
            return self._closed(ev)
        if type(ev) is StepEnded:
            self.stop_reason = ev.stop_reason
            self.raw_stop_reason = ev.raw_stop_reason
            self.usage = ev.usage
            return None
        raise ProviderProtocolError(f"unknown provider event {ev!r}")

    def _opened(self, ev: BlockOpened) -> BlockStart:
        if ev.key in self._open:
            raise ProviderProtocolError(f"block {ev.key!r} opened twice")
        tool_use_id = ev.tool_use_id
        if ev.kind == "tool_use":
            tool_use_id = self._unique_id(tool_use_id)
        st = _Open(seq=self._next_seq, kind=ev.kind, tool_use_id=tool_use_id, name=ev.name, data=ev.data)
        self._next_seq += 1
        if ev.kind == "tool_use":
            st.json = PartialJSON()
        self._open[ev.key] = st
        kind = ev.kind
        if kind == "tool_use":
            return BlockStart(index=st.seq, type="tool_use", tool_use_id=tool_use_id, tool_name=ev.name)
        return BlockStart(index=st.seq, type=kind)

    def _unique_id(self, tool_use_id: str | None) -> str:
        """The call's id, or a new one when it is missing or was already used in this session
        (some servers reuse ``call_1`` in every turn; ids must pair one call with one result)."""
        if tool_use_id and tool_use_id not in self._taken:
            self._taken.add(tool_use_id)
            return tool_use_id
        base = tool_use_id or "toolu_ts"
        k = 2
        while f"{base}_{k}" in self._taken:
            k += 1
        self._taken.add(f"{base}_{k}")
        return f"{base}_{k}"

    def _delta(self, ev: Delta) -> BlockDelta | None:
        st = self._open.get(ev.key)
        if st is None:
            raise ProviderProtocolError(f"delta for block {ev.key!r} that is not open")
        kind = ev.kind
        if kind == "text" or kind == "thinking":
            st.parts.append(ev.value)
            # nobody follows the turn live (``snapshots`` off): no event object to build
            return BlockDelta(index=st.seq, text=ev.value) if self.snapshots else None
        if kind == "input_json":
            pj = st.json
            frag: str = ev.value
            if pj is None:  # a provider block's input (server tools): kept raw, parsed at its end
                st.parts.append(frag)
                return None
            if not frag:
                return None
            if self.snapshots:
                pj.feed(frag)
                snap = None
                size = len(pj)
                if size < _SNAPSHOT_EVERY_FRAGMENT_BELOW or size >= st.next_snapshot:
                    snap = pj.snapshot()
                    st.next_snapshot = int(size * _SNAPSHOT_GROWTH)
                return BlockDelta(index=st.seq, partial_json=frag, input=snap)
            st.parts.append(frag)
            return None
        if kind == "signature":
            st.signature += ev.value
            return None
        if kind == "citation":
            if st.citations is None:
                st.citations = []
            st.citations.append(ev.value)
            return None
        raise ProviderProtocolError(f"unknown delta kind {kind!r}")

    def _closed(self, ev: BlockClosed) -> BlockStop:
        st = self._open.pop(ev.key, None)
        if st is None:
            raise ProviderProtocolError(f"stop for block {ev.key!r} that is not open")
        block = self._finish(st, complete=True)
        self.finished.append(block)
        return BlockStop(index=st.seq, block=block)

    def _raw_input(self, st: _Open) -> str:
        if st.json is not None and len(st.json):
            return st.json.text
        return "".join(st.parts)

    def _finish(self, st: _Open, *, complete: bool) -> Block:
        seq, step = st.seq, self.step
        kind = st.kind
        if kind == "text":
            return TextBlock(seq=seq, step=step, text="".join(st.parts), citations=st.citations)
        if kind == "thinking":
            return ThinkingBlock(seq=seq, step=step, thinking="".join(st.parts), signature=st.signature,
                                 origin=self.origin)
        if kind == "redacted_thinking":
            return RedactedThinkingBlock(seq=seq, step=step, data=str((st.data or {}).get("data", "")),
                                         origin=self.origin)
        if kind == "tool_use":
            return self._finish_tool(st, complete=complete)
        data = dict(st.data or {})
        if st.json is not None or st.parts:
            raw = self._raw_input(st)
            if raw and too_deep(raw):
                data["input_raw"] = raw
            elif raw:
                try:
                    data["input"] = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    data["input_raw"] = raw
        if st.citations:
            data["citations"] = st.citations
        return ProviderBlock(seq=seq, step=step, provider=self.provider, data=data, origin=self.origin)

    def _finish_tool(self, st: _Open, *, complete: bool) -> ToolUseBlock:
        raw = self._raw_input(st)
        prefilled = (st.data or {}).get("input")
        tid, name = st.tool_use_id or "", st.name or ""
        if not raw.strip():
            value: Any = prefilled if isinstance(prefilled, dict) and not raw else {}
            return ToolUseBlock(seq=st.seq, step=self.step, tool_use_id=tid, name=name, input=value,
                                raw_input=raw or None,
                                input_error=None if complete else "the call was interrupted before it was complete")
        if too_deep(raw):
            return ToolUseBlock(seq=st.seq, step=self.step, tool_use_id=tid, name=name, input={}, raw_input=raw,
                                input_error=f"the arguments are nested deeper than {MAX_DEPTH} levels")
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            partial = PartialJSON()
            partial.feed(raw)
            snap = partial.snapshot()
            reason = (f"the arguments are not valid JSON ({exc})" if complete
                      else "the call was interrupted before it was complete")
            return ToolUseBlock(seq=st.seq, step=self.step, tool_use_id=tid, name=name,
                                input=snap if isinstance(snap, dict) else {}, raw_input=raw, input_error=reason)
        if isinstance(value, str):
            # Some servers encode the arguments twice; decode once more, never more.
            try:
                inner = None if too_deep(value) else orjson.loads(value)
            except orjson.JSONDecodeError:
                inner = None
            if isinstance(inner, dict):
                value = inner
        if not isinstance(value, dict):
            return ToolUseBlock(seq=st.seq, step=self.step, tool_use_id=tid, name=name, input={}, raw_input=raw,
                                input_error=f"the arguments must be a JSON object, got {type(value).__name__}")
        return ToolUseBlock(seq=st.seq, step=self.step, tool_use_id=tid, name=name, input=value, raw_input=raw,
                            input_error=None if complete else "the call was interrupted before it was complete")

    def partial_blocks(self) -> list[Block]:
        """Blocks still open, finished as they stand (sorted by seq). Tool calls among them
        carry an ``input_error``, so they are never run."""
        out = [self._finish(st, complete=False) for st in self._open.values()]
        out.sort(key=lambda b: b.seq)
        return out

    def close_all_open(self) -> list[BlockStop]:
        """End every open block (the stream ended or was cancelled): their stop events."""
        stops = [BlockStop(index=b.seq, block=b) for b in self.partial_blocks()]
        self.finished.extend(s.block for s in stops if s.block is not None)
        self._open.clear()
        return stops
