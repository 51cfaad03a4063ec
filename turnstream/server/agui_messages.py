"""The messages an AG-UI client holds, built from the events as ``@ag-ui/client`` builds them,
so that a ``MESSAGES_SNAPSHOT`` (``agui.py``, on a restarted step) says the true state: the
run's input messages as the client sent them, then what the run's events add.

``@ag-ui/client`` 1.0 adds a message per ``TEXT_MESSAGE_START`` (role ``assistant``) and per
``REASONING_MESSAGE_START`` (role ``reasoning``), an assistant message per ``TOOL_CALL_START``
without a parent (its id is the call's), and a tool message per ``TOOL_CALL_RESULT``, placed
after its call's message and the tool messages that follow it. Contents and arguments are kept
in pieces and joined only for a snapshot: a long answer arrives in thousands of deltas.
"""

from __future__ import annotations

from typing import Any

Ev = dict[str, Any]


class ClientMessages:
    def __init__(self, given: list[Ev] | None = None) -> None:
        self._messages: list[Ev] = [dict(m) for m in given or ()]
        self._texts: dict[str, list[str]] = {}
        """Text and reasoning messages' contents, in pieces, by message id."""
        self._args: dict[str, list[str]] = {}
        """Calls' arguments, in pieces, by call id."""
        self._mark = len(self._messages)

    def mark(self) -> None:
        """A step starts: what follows is its messages (``drop_step`` removes them)."""
        self._mark = len(self._messages)

    def drop_step(self) -> list[str]:
        """Remove the running step's messages; returns the ids of the calls they held."""
        dropped = self._messages[self._mark:]
        del self._messages[self._mark:]
        return [str(c["id"]) for m in dropped for c in m.get("toolCalls", ())]

    def text(self, mid: str, role: str, name: str | None = None) -> None:
        self._texts[mid] = []
        self._messages.append({"id": mid, "role": role, "content": "", **({"name": name} if name else {})})

    def call(self, call_id: str, name: str) -> None:
        if call_id in self._args:
            return  # the client keeps one call per id
        self._args[call_id] = []
        self._messages.append({"id": call_id, "role": "assistant", "toolCalls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]})

    def content(self, kind: str, mid: str, piece: str) -> None:
        """A piece of a text or reasoning message (``mid``), or of a call's arguments (``kind``
        ``tool``, ``mid`` the call's id)."""
        (self._args if kind == "tool" else self._texts)[mid].append(piece)

    def result(self, mid: str, call_id: str, content: str) -> None:
        message = {"id": mid, "toolCallId": call_id, "role": "tool", "content": content}
        at = next((i for i, m in enumerate(self._messages) if m.get("role") == "assistant"
                   and any(c.get("id") == call_id for c in m.get("toolCalls") or ())), None)
        if at is None:
            self._messages.append(message)
            return
        at += 1
        while at < len(self._messages) and self._messages[at].get("role") == "tool":
            at += 1
        self._messages.insert(at, message)

    def snapshot(self) -> list[Ev]:
        out: list[Ev] = []
        for m in self._messages:
            m = dict(m)
            if m["id"] in self._texts:
                m["content"] = "".join(self._texts[m["id"]])
            if "toolCalls" in m:
                m["toolCalls"] = [self._with_arguments(c) for c in m["toolCalls"]]
            out.append(m)
        return out

    def _with_arguments(self, call: Ev) -> Ev:
        pieces = self._args.get(call["id"])
        return call if pieces is None else {**call, "function": {**call["function"], "arguments": "".join(pieces)}}


__all__ = ["ClientMessages"]
