"""The OpenAI Responses API's stream, read: ``StreamParser`` maps its decoded events to
neutral provider events (``openai_responses.py`` builds the request and runs the provider).

The stream is typed events (``event: response.…`` lines are optional: OpenRouter omits them,
so the payload's ``type`` decides). Output items are keyed by ``output_index`` (item ids
are not stable everywhere: GitHub Copilot rotates them per event):

* ``message`` → a ``text`` block (``output_text`` and ``refusal`` deltas; annotations become
  citations);
* ``function_call`` → a ``tool_use`` block keyed by ``call_id``; argument deltas stream as
  they come; servers that send no deltas (xAI, LM Studio) get the arguments from
  ``…arguments.done`` or the finished item. The call is final on ``…arguments.done`` /
  ``output_item.done`` / the response's end, never because its JSON parses;
* ``reasoning`` → a ``thinking`` block (see below);
* any other item (hosted tools, MCP, ``custom_tool_call``, …) → a ``provider`` block whose
  ``data`` is ``{"type": <item type>, "input": <the finished item>}``.

Blocks close in output order even when a server interleaves items (OpenRouter finishes the
message before the reasoning it follows), because turn blocks are stored in ``seq`` order.

The step ends on ``response.completed`` (``tool_use`` when it holds function calls, else
``end_turn``), ``response.incomplete`` (``max_tokens``; ``content_filter`` → ``refusal``;
items left open are closed, so cut-off arguments fail to parse and are never run) or
``response.failed`` (``ProviderStreamError``). A top-level ``error`` event raises
``ProviderStreamError`` classified by its type/code. A body that ends without one of the
three final events is a ``StreamBrokenError``, whatever came before (``[DONE]`` included).

Reasoning items: stored as a ``ThinkingBlock``. ``thinking`` is the readable part (summary
parts joined by a blank line, or raw ``reasoning_text``); ``signature`` is
``{"item": <the reasoning item exactly as output_item.done carried it>, "next_id": <id of
the item that followed it>}`` as compact JSON, which the request replays
(``openai_responses.py``).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from ..blocks import StopReason, Usage
from ..errors import StreamBrokenError
from .base import BlockClosed, BlockOpened, Delta, ProviderEvent, StepEnded
from .openai_chat import ToolIdStyle, new_tool_id, stream_error

log = logging.getLogger("turnstream.providers.openai_responses")  # the adapter's one logger

_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def _usage(u: dict[str, Any] | None) -> Usage:
    """The response's usage; ``unknown`` when it has none (a bridge that never counts)."""
    if not isinstance(u, dict) or (u.get("input_tokens") is None and u.get("output_tokens") is None):
        return Usage(unknown=True)
    usage = Usage()
    usage.input_tokens = int(u.get("input_tokens") or 0)
    usage.output_tokens = int(u.get("output_tokens") or 0)
    details = u.get("input_tokens_details")
    if isinstance(details, dict):
        usage.cache_read_input_tokens = int(details.get("cached_tokens") or 0)
    return usage


class _Item:
    __slots__ = ("done", "done_item", "got_args", "kind", "next_id", "parts", "pending_args", "type")

    def __init__(self, type_: str, kind: str) -> None:
        self.type = type_
        self.kind = kind
        self.done = False
        self.done_item: dict[str, Any] | None = None
        self.got_args = False
        self.pending_args: str | None = None
        self.next_id: str | None = None
        self.parts: set[tuple[Any, Any]] = set()


class StreamParser:
    """Maps decoded Responses events to neutral events; knows nothing of HTTP."""

    __slots__ = ("_by_item_id", "_closed", "_dropped", "_has_calls", "_id_style", "_items", "_order", "_orphans",
                 "done", "usage")

    def __init__(self, *, id_style: ToolIdStyle = "openai") -> None:
        self.usage = Usage()
        self.done = False
        self._id_style: ToolIdStyle = id_style
        self._items: dict[int, _Item] = {}
        self._order: list[int] = []  # open items, in opening (= seq) order
        self._by_item_id: dict[str, int] = {}
        self._closed: set[int] = set()
        self._has_calls = False
        self._orphans: dict[str, int | None] = {}
        """Text items that streamed deltas without being announced: name -> block key (None
        until a non-empty delta opened the block)."""
        self._dropped = 0
        """Deltas of unannounced items that could not be streamed (their call id, name or
        kind is unknown until the final output)."""

    def parse(self, data: str) -> list[ProviderEvent]:
        if data.strip() == "[DONE]":
            return []  # OpenRouter's trailer; the typed final event is what counts
        try:
            ev = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StreamBrokenError(f"malformed event in the stream: {data[:200]!r}", retryable=True) from exc
        if not isinstance(ev, dict):
            raise StreamBrokenError(f"unexpected event in the stream: {data[:200]!r}", retryable=True)
        t = ev.get("type")
        out: list[ProviderEvent] = []
        if t == "response.output_item.added":
            self._added(ev, out)
        elif t in ("response.output_text.delta", "response.refusal.delta"):
            idx = self._index(ev)
            if idx is not None:
                if ev.get("delta"):
                    out.append(Delta(idx, "text", ev["delta"]))
            else:
                self._unannounced_text(ev, out)
        elif t == "response.function_call_arguments.delta":
            idx = self._index(ev)
            if idx is not None:
                if ev.get("delta"):
                    self._items[idx].got_args = True
                    out.append(Delta(idx, "input_json", ev["delta"]))
            elif self._unannounced(ev):
                self._dropped += 1
        elif t == "response.function_call_arguments.done":
            idx = self._index(ev)
            if idx is not None:
                self._complete_args(idx, ev.get("arguments"), out)
        elif t in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            idx = self._index(ev)
            if idx is not None:
                if ev.get("delta"):
                    self._thinking(idx, ev, out)
            elif self._unannounced(ev):
                self._dropped += 1
        elif t == "response.output_text.annotation.added":
            idx = self._index(ev)
            if idx is not None and isinstance(ev.get("annotation"), dict):
                out.append(Delta(idx, "citation", ev["annotation"]))
        elif t == "response.output_item.done":
            self._item_done(ev, out)
        elif t in _FINAL_EVENTS:
            return self._final(t, ev)
        elif t == "error":
            raise stream_error(ev.get("error") if isinstance(ev.get("error"), dict) else ev)
        return out

    # -- items -----------------------------------------------------------------------------

    def _index(self, ev: dict[str, Any]) -> int | None:
        idx = ev.get("output_index")
        if not isinstance(idx, int):
            idx = self._by_item_id.get(str(ev.get("item_id")))
        if idx is None or idx not in self._items or idx in self._closed:
            return None
        return idx

    def _added(self, ev: dict[str, Any], out: list[ProviderEvent]) -> None:
        item = ev.get("item") or {}
        idx = ev.get("output_index")
        if not isinstance(idx, int):
            idx = max(self._items, default=-1) + 1
        if idx in self._items:
            return
        itype = str(item.get("type") or "")
        if item.get("id"):
            self._by_item_id[str(item["id"])] = idx
        prev = self._items.get(idx - 1)
        if prev is not None and prev.type == "reasoning" and prev.next_id is None:
            prev.next_id = str(item.get("id") or "") or None
        if itype == "message":
            st = _Item(itype, "text")
            out.append(BlockOpened(idx, "text"))
        elif itype == "reasoning":
            st = _Item(itype, "thinking")
            out.append(BlockOpened(idx, "thinking"))
        elif itype == "function_call":
            st = _Item(itype, "tool_use")
            self._has_calls = True
            call_id = str(item.get("call_id") or "") or new_tool_id(self._id_style)
            out.append(BlockOpened(idx, "tool_use", tool_use_id=call_id, name=str(item.get("name") or "")))
            if isinstance(item.get("arguments"), str) and item["arguments"]:
                st.pending_args = item["arguments"]  # xAI: the whole call arrives here
        else:
            st = _Item(itype, "provider")
            out.append(BlockOpened(idx, "provider", data={"type": itype}))
        self._items[idx] = st
        self._order.append(idx)
        self._flush(out)  # a reasoning item waiting for its follower may close now

    # -- items never announced ---------------------------------------------------------------
    # open-responses-server streams deltas for items it never announces with
    # ``response.output_item.added`` and puts the items in the final response's ``output``.
    # Text deltas stream as a text block of their own; deltas of other kinds are dropped (a
    # call's id and name are unknown until the end); at the final event, every output item
    # that never streamed is taken from ``output`` (``_reconcile``). A warning says so.

    def _unannounced(self, ev: dict[str, Any]) -> bool:
        """True when the event's item was never announced (not merely closed already)."""
        idx = ev.get("output_index")
        if isinstance(idx, int) and idx in self._items:
            return False
        return str(ev.get("item_id")) not in self._by_item_id

    def _unannounced_text(self, ev: dict[str, Any], out: list[ProviderEvent]) -> None:
        if not self._unannounced(ev):
            return
        item_id = ev.get("item_id")
        name = str(item_id) if item_id else f"#{ev.get('output_index')}"
        key = self._orphans.get(name)
        if key is None:
            self._orphans[name] = None  # seen: its output item is not taken from the final output
            if not ev.get("delta"):
                return
            key = -1 - sum(1 for k in self._orphans.values() if k is not None)  # below every output_index
            self._items[key] = _Item("message", "text")
            self._order.append(key)
            self._orphans[name] = key
            out.append(BlockOpened(key, "text"))
        if ev.get("delta"):
            out.append(Delta(key, "text", ev["delta"]))

    def _reconcile(self, output: Any, out: list[ProviderEvent]) -> None:
        """Open, fill and finish every item of the final ``output`` that never streamed."""
        missing: list[tuple[int, dict[str, Any]]] = []
        for pos, item in enumerate(output if isinstance(output, list) else ()):
            if not isinstance(item, dict) or pos in self._items:
                continue
            item_id = str(item.get("id") or "")
            if item_id and (item_id in self._by_item_id or item_id in self._orphans):
                continue
            missing.append((pos, item))
        if missing or self._orphans or self._dropped:
            log.warning("the Responses stream sent %d delta(s) for items it never announced; %d item(s) "
                        "taken from the final output: %s", self._dropped + len(self._orphans), len(missing),
                        ", ".join(f"{i.get('type')} {i.get('id') or i.get('call_id') or ''}".strip()
                                  for _, i in missing) or "none")
        for pos, item in missing:
            ev = {"output_index": pos, "item": item}
            self._added(ev, out)
            st = self._items.get(pos)
            if st is None:
                continue
            if st.kind == "text":
                text = "".join(str(c.get("text") or c.get("refusal") or "") for c in item.get("content") or ()
                               if isinstance(c, dict))
                if text:
                    out.append(Delta(pos, "text", text))
            elif st.kind == "thinking":
                parts = [str(c.get("text") or "") for c in item.get("summary") or () if isinstance(c, dict)]
                parts = parts or [str(c.get("text") or "") for c in item.get("content") or ()
                                  if isinstance(c, dict) and c.get("type") == "reasoning_text"]
                if any(parts):
                    out.append(Delta(pos, "thinking", "\n\n".join(parts)))
            self._item_done(ev, out)

    def _thinking(self, idx: int, ev: dict[str, Any], out: list[ProviderEvent]) -> None:
        st = self._items[idx]
        part = (ev.get("type"), ev.get("summary_index", ev.get("content_index")))
        if part not in st.parts:
            if st.parts:
                out.append(Delta(idx, "thinking", "\n\n"))
            st.parts.add(part)
        out.append(Delta(idx, "thinking", ev["delta"]))

    def _complete_args(self, idx: int, args: Any, out: list[ProviderEvent]) -> None:
        st = self._items[idx]
        if st.kind != "tool_use" or st.got_args:
            return
        text = args if isinstance(args, str) and args else st.pending_args
        if text:
            out.append(Delta(idx, "input_json", text))
        st.got_args = True

    def _item_done(self, ev: dict[str, Any], out: list[ProviderEvent]) -> None:
        idx = self._index(ev)
        if idx is None:
            return
        st = self._items[idx]
        item = ev.get("item") if isinstance(ev.get("item"), dict) else {}
        assert isinstance(item, dict)
        st.done_item = item
        if st.kind == "tool_use":
            self._complete_args(idx, item.get("arguments"), out)
        elif st.kind == "provider":
            out.append(Delta(idx, "input_json", orjson.dumps(item).decode()))
        st.done = True
        self._flush(out)

    def _flush(self, out: list[ProviderEvent], *, ending: bool = False) -> None:
        """Close finished items from the front, so blocks close in output order. A reasoning
        item also waits for the item after it (its id goes into the signature)."""
        while self._order:
            idx = self._order[0]
            st = self._items[idx]
            if not ending and (not st.done or (st.kind == "thinking" and st.next_id is None)):
                return
            self._order.pop(0)
            if st.kind == "thinking" and st.done and st.done_item is not None:
                sig = {"item": st.done_item, "next_id": st.next_id}
                out.append(Delta(idx, "signature", orjson.dumps(sig).decode()))
            if st.kind == "tool_use" and not st.got_args and st.pending_args:
                self._complete_args(idx, None, out)  # a whole call in output_item.added, never finished
            self._closed.add(idx)
            out.append(BlockClosed(idx))

    def _final(self, t: str, ev: dict[str, Any]) -> list[ProviderEvent]:
        resp = ev.get("response") if isinstance(ev.get("response"), dict) else {}
        assert isinstance(resp, dict)
        if t == "response.failed":
            err = resp.get("error") or {"message": "the response failed"}
            raise stream_error(err, what="the response failed")
        out: list[ProviderEvent] = []
        self._reconcile(resp.get("output"), out)
        self._flush(out, ending=True)
        self.usage = _usage(resp.get("usage"))
        self.done = True
        stop: StopReason
        if t == "response.incomplete":
            details = resp.get("incomplete_details") or {}
            reason = details.get("reason") if isinstance(details, dict) else None
            stop = "refusal" if reason == "content_filter" else "max_tokens"
            raw = f"incomplete:{reason}"
        else:
            stop = "tool_use" if self._has_calls else "end_turn"
            raw = str(resp.get("status") or "completed")
        out.append(StepEnded(stop, self.usage, raw))
        return out

    def end_of_body(self) -> list[ProviderEvent]:
        if not self.done:
            raise StreamBrokenError("the stream ended without response.completed, response.incomplete "
                                    "or response.failed", retryable=True)
        return []


__all__ = ["StreamParser"]
