"""The scenario engine behind both ``scripted:<name>`` and ``turnstream mock-provider``.

A scenario is JSON (``turnstream/scenarios/*.json`` ships the built-in ones)::

    {"name": "weather", "fragment_size": 8, "delay_ms": 0,
     "steps": [
       {"blocks": [{"type": "text", "text": "Let me look."},
                   {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 20, "output_tokens": 12}},
       {"blocks": [{"type": "text", "text": "It is {{last}} in Paris."}]}]}

The step played is the number of assistant messages since the user's last text message
(a turn's first call plays step 0, the call after its tool results step 1, …; past the end
the last step repeats). ``"turns": [[step, …], …]`` instead of ``steps`` scripts several
user turns, picked by the number of user text messages. A turn may also branch on what the
tools said: ``{"steps": [first, …], "then": [{"when": "<template>", "steps": […]}, …]}`` plays
``steps``, then the steps of the first ``then`` entry whose ``when`` renders to something
(not empty, ``[]``, ``{}``, ``0``, ``false`` or ``null``; an entry without ``when`` always
matches), so ``"when": "{{results[0].files}}"`` follows one path when the first tool result
lists files. A top-level ``then`` beside ``steps`` does the same for a one-turn scenario.
Strings may hold templates:
``{{last}}`` / ``{{last.key}}`` (the latest tool result, parsed as JSON when it is JSON),
``{{results[0].key}}`` (this turn's results in order), ``{{input}}`` (the user's text).

``"replies": [{"when": {"input": REGEX, "tools": [name, …]}, "steps": […]}, …]`` answers by
what the request holds, as a model would: the first reply whose ``input`` pattern is found in
the user's last message and whose ``tools`` are all offered plays its ``steps`` (a reply
without ``when`` always does; ``"scenario": NAME`` plays another built-in scenario). Named
groups of the pattern fill ``{{match.name}}``. When no reply fits, ``steps``/``turns`` play.

Blocks: ``text``, ``thinking`` (with ``signature``), ``redacted_thinking`` (``data``),
``tool_use`` (``name``, ``input``, optional ``id``, ``raw`` to stream exact argument bytes,
``cut_at`` to stop the arguments after N characters unless the request's ``max_tokens`` is
at least ``fits_max_tokens``).

Faults, per step (``"fault": {…}``), applied to the first ``times`` attempts (default 1):
``{"kind": "status", "status": 529, "retry_after": 0.01}``, ``{"kind": "error_event",
"after_events": 3, "error_type": "overloaded_error", "message": "Overloaded"}``,
``{"kind": "drop", "after_bytes": 300}``, ``{"kind": "malformed", "after_events": 2}``,
``{"kind": "truncate"}`` (no final event, clean close), ``{"kind": "slow", "delay_ms": 50}``.

A gate, per step (``"gate": {"after_events": 2, "fifo": PATH}``), for a test that must see
what happens while the stream is half way: every request playing the step stops after that
many events (frames, for ``turnstream mock-provider``) until someone opens the FIFO at PATH
for writing (``open_gate`` in ``tests/support/ui_stream.py``), with nothing timed.

The engine works on a provider-neutral view of the request (``RequestView``) and produces
a ``StepScript``; wire encoders turn that into each API's bytes.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

_TEMPLATE = re.compile(r"\{\{\s*([^}]+?)\s*\}\}")
_PATH_PART = re.compile(r"\.?([A-Za-z_][\w-]*)|\[(-?\d+)\]")


@dataclass(slots=True)
class RequestView:
    """What the engine needs to know about a request, whatever its wire format."""

    user_texts: int
    """How many user messages carry text (the user's turns so far)."""
    rounds: int
    """Assistant messages since the last user text message."""
    results: list[str]
    """Tool results since the last user text message, in order."""
    last_input: str
    max_tokens: int = 8192
    tool_names: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ScriptBlock:
    type: str
    text: str = ""
    signature: str = ""
    data: str = ""
    name: str = ""
    id: str = ""
    arguments: str = ""
    """Tool arguments as the exact JSON text to stream."""
    complete: bool = True
    """False when the arguments are cut off (max_tokens)."""


@dataclass(slots=True)
class StepScript:
    blocks: list[ScriptBlock]
    stop_reason: str
    usage: dict[str, int]
    fragment_size: int
    delay_s: float
    fault: dict[str, Any] | None
    gate: dict[str, Any] | None = None


async def wait_at_gate(gate: dict[str, Any]) -> None:
    """Until the gate's FIFO is opened for writing (opening it to read blocks until then)."""
    await asyncio.to_thread(Path(str(gate["fifo"])).read_bytes)


def _lookup(root: Any, path: str) -> Any:
    cur = root
    for m in _PATH_PART.finditer(path):
        key, idx = m.group(1), m.group(2)
        try:
            cur = cur[int(idx)] if idx is not None else cur[key]
        except (KeyError, IndexError, TypeError, ValueError):
            return ""
    return cur


def _parse(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def render(value: Any, view: RequestView, match: dict[str, str] | None = None) -> Any:
    """Fill templates inside strings (recursively in lists and dicts); ``match`` holds the named
    groups of the reply's input pattern."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            expr = m.group(1)
            head, _, rest = expr.partition(".")
            if expr.startswith("results["):
                idx_end = expr.index("]")
                i = int(expr[len("results["):idx_end])
                try:
                    base: Any = _parse(view.results[i])
                except IndexError:
                    return ""
                found = _lookup(base, expr[idx_end + 1:])
            elif head == "last":
                base = _parse(view.results[-1]) if view.results else ""
                found = _lookup(base, rest) if rest else base
            elif head == "input":
                found = view.last_input
            elif head == "match" and match is not None and rest in match:
                found = match[rest]
            else:
                return m.group(0)
            return found if isinstance(found, str) else json.dumps(found)
        return _TEMPLATE.sub(sub, value)
    if isinstance(value, list):
        return [render(v, view, match) for v in value]
    if isinstance(value, dict):
        return {k: render(v, view, match) for k, v in value.items()}
    return value


@dataclass(slots=True)
class Reply:
    """One of a scenario's ``replies``: when it fits a request, and what it plays."""

    pattern: re.Pattern[str] | None
    tools: tuple[str, ...]
    steps: list[dict[str, Any]] | dict[str, Any]
    """Its steps, or a branching turn (``steps`` and ``then``), as a turn of ``turns``."""
    scenario: str | None

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Reply:
        when = doc.get("when") or {}
        pattern = re.compile(when["input"]) if when.get("input") else None
        steps: list[dict[str, Any]] | dict[str, Any] = doc.get("steps") or []
        if "then" in doc:
            steps = {"steps": steps, "then": doc["then"]}
        if not steps and not doc.get("scenario"):
            raise ValueError("a reply needs steps or a scenario")
        return cls(pattern, tuple(when.get("tools") or ()), steps, doc.get("scenario"))

    def fits(self, view: RequestView) -> dict[str, str] | None:
        """The named groups of the input pattern when this reply fits ``view``, else None."""
        if any(t not in view.tool_names for t in self.tools):
            return None
        if self.pattern is None:
            return {}
        m = self.pattern.search(view.last_input)
        return None if m is None else {k: v for k, v in m.groupdict().items() if v is not None}


class Scenario:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.name: str = doc.get("name", "scenario")
        if "turns" in doc:
            self.turns: list[list[dict[str, Any]] | dict[str, Any]] = doc["turns"]
        elif "then" in doc:
            self.turns = [{"steps": doc.get("steps") or [], "then": doc["then"]}]
        else:
            self.turns = [doc.get("steps") or [{"blocks": [{"type": "text", "text": "Hello from turnstream."}]}]]
        self.replies = [Reply.of(r) for r in doc.get("replies") or []]
        self.steering = bool(doc.get("steering", False))
        """Text right after tool results (a message queued while the turn ran) goes on with the
        round instead of starting the next scripted turn (docs/scenarios.md)."""
        self.fragment_size = int(doc.get("fragment_size", 16))
        self.delay_ms = float(doc.get("delay_ms", 0))
        self._others: dict[str, Scenario] = {}
        self._attempts: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()
        self._ids = 0

    @classmethod
    def load(cls, name_or_path: str) -> Scenario:
        """A built-in scenario by name, or a scenario file by path."""
        p = Path(name_or_path)
        if p.suffix == ".json" and p.exists():
            return cls(json.loads(p.read_text()))
        return cls.builtin(name_or_path)

    @classmethod
    def builtin(cls, name: str) -> Scenario:
        """A built-in scenario by name (``KeyError`` for any other name, a path included)."""
        names = builtin_names()
        if name not in names:
            raise KeyError(f"unknown scenario {name!r} (built-in: {', '.join(names)})")
        return cls(json.loads(resources.files("turnstream.scenarios").joinpath(f"{name}.json").read_text()))

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:06d}"

    def _other(self, name: str) -> Scenario:
        with self._lock:
            if name not in self._others:
                self._others[name] = Scenario.builtin(name)  # never a file: a reply cannot widen what is read
            return self._others[name]

    def script(self, view: RequestView, *, id_prefix: str = "toolu_mock_") -> StepScript:
        match: dict[str, str] | None = None
        for i, reply in enumerate(self.replies):
            match = reply.fits(view)
            if match is not None:
                if reply.scenario:
                    return self._other(reply.scenario).script(view, id_prefix=id_prefix)
                steps, turn_idx = _steps_of(reply.steps, view), -1 - i  # faults counted apart from the turns'
                break
        else:
            turn_idx = min(max(view.user_texts - 1, 0), len(self.turns) - 1)
            steps = _steps_of(self.turns[turn_idx], view)
        step_idx = min(view.rounds, len(steps) - 1)
        step = steps[step_idx]
        fault = step.get("fault")
        if fault is not None:
            with self._lock:
                k = (turn_idx, step_idx)
                n = self._attempts.get(k, 0)
                self._attempts[k] = n + 1
            if n >= int(fault.get("times", 1)):
                fault = None
        blocks: list[ScriptBlock] = []
        for spec in step.get("blocks", []):
            spec = render(spec, view, match)
            t = spec["type"]
            if t == "tool_use":
                raw = spec["raw"] if "raw" in spec else json.dumps(spec.get("input", {}))
                complete = True
                cut_at = spec.get("cut_at")
                if cut_at is not None and view.max_tokens < int(spec.get("fits_max_tokens", 1 << 30)):
                    raw, complete = raw[: int(cut_at)], False
                blocks.append(ScriptBlock("tool_use", name=spec["name"], id=spec.get("id") or self._next_id(id_prefix),
                                          arguments=raw, complete=complete))
            elif t == "thinking":
                blocks.append(ScriptBlock("thinking", text=spec.get("thinking", ""),
                                          signature=spec.get("signature", "sig-mock")))
            elif t == "redacted_thinking":
                blocks.append(ScriptBlock("redacted_thinking", data=spec.get("data", "")))
            else:
                blocks.append(ScriptBlock("text", text=spec.get("text", "")))
        has_tool = any(b.type == "tool_use" for b in blocks)
        stop = step.get("stop_reason") or ("tool_use" if has_tool else "end_turn")
        if any(not b.complete for b in blocks):
            stop = "max_tokens"
        usage = {"input_tokens": 10, "output_tokens": 10, **step.get("usage", {})}
        delay = float(step.get("delay_ms", self.delay_ms)) / 1000
        if fault is not None and fault.get("kind") == "slow":
            delay = float(fault.get("delay_ms", 50)) / 1000
        return StepScript(blocks, stop, usage, int(step.get("fragment_size", self.fragment_size)), delay, fault,
                          step.get("gate"))


_NOTHING = ("", "[]", "{}", "0", "false", "null")


def _steps_of(turn: list[dict[str, Any]] | dict[str, Any], view: RequestView) -> list[dict[str, Any]]:
    """A turn's steps; for a branching turn, its first steps and then the branch that holds."""
    if isinstance(turn, list):
        return turn
    head: list[dict[str, Any]] = list(turn.get("steps") or [])
    branches: list[dict[str, Any]] = turn.get("then") or []
    if view.rounds < len(head) or not branches:
        return head
    for branch in branches:
        when = branch.get("when")
        if when is None:
            return head + list(branch.get("steps") or [])
        said = render(when, view)
        if said.strip() not in _NOTHING and "{{" not in said:
            return head + list(branch.get("steps") or [])
    return head + list(branches[-1].get("steps") or [])


def text_of(content: Any) -> str:
    """The text of a message or tool-result ``content``: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("turnstream.scenarios").iterdir()
                  if p.name.endswith(".json"))


def fragments(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
