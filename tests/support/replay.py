"""Recorded streams → neutral events → blocks, and the blocks the official SDKs expect.

Shared by the fixture tests (unit, every split of the bytes) and the HTTP replay tests
(integration). Each API's ``StreamParser`` is driven exactly as its provider drives it, so
what is checked here is what ``Provider.stream()`` yields.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.paths import STREAMS
from turnstream.assemble import Assembler
from turnstream.blocks import (
    Block,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from turnstream.errors import ProviderError
from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors
from turnstream.providers import anthropic, openai_chat, openai_responses, openai_responses_stream
from turnstream.providers.base import ModelRequest, ProviderEvent, StepEnded, ToolSpec
from turnstream.providers.http import EventStream, SSEParser
from turnstream.sse_decoder import SSEDecoder
from turnstream.transcript import repair, turn_messages

APIS = ("anthropic-messages", "openai-chat", "openai-responses")
ORIGIN = {"anthropic-messages": "anthropic:fixture", "openai-chat": "openai:fixture",
          "openai-responses": "openai-responses:fixture"}
PROVIDER = {"anthropic-messages": "anthropic", "openai-chat": "openai", "openai-responses": "openai-responses"}


@dataclass(frozen=True)
class Case:
    api: str
    name: str
    sse: Path
    meta: dict[str, Any] = field(hash=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.api}/{self.name}"

    @property
    def body(self) -> bytes:
        return self.sse.read_bytes()

    @property
    def sdk_error(self) -> str | None:
        err = self.meta.get("expected_error")
        return str(err) if err else None


def cases(api: str | None = None) -> list[Case]:
    out = []
    for a in APIS if api is None else (api,):
        for sse in sorted((STREAMS / a).glob("*.sse")):
            meta = json.loads(sse.with_suffix(".json").read_text())
            out.append(Case(a, sse.stem, sse, meta))
    return out


def case(api: str, name: str) -> Case:
    return next(c for c in cases(api) if c.name == name)


# -- driving a parser ----------------------------------------------------------------------

@dataclass
class Outcome:
    events: list[ProviderEvent]
    error: ProviderError | None


def drive(api: str, pieces: Iterable[bytes], *, id_style: openai_chat.ToolIdStyle = "openai") -> Outcome:
    """Feed body pieces as the provider does; the events it yields, and the error it raises."""
    parser: SSEParser
    if api == "anthropic-messages":
        parser = anthropic.StreamParser()
    elif api == "openai-chat":
        parser = openai_chat.StreamParser(id_style=id_style)
    else:
        parser = openai_responses_stream.StreamParser(id_style=id_style)
    stream = EventStream(parser)  # what every adapter runs over its HTTP body (providers/http.py)
    events: list[ProviderEvent] = []
    try:
        for piece in pieces:
            events.extend(stream.feed(piece))
            if parser.done:
                return Outcome(events, None)
        events.extend(stream.finish())
    except ProviderError as exc:
        return Outcome(events, exc)
    return Outcome(events, None)


def split_at(body: bytes, cuts: Sequence[int]) -> list[bytes]:
    edges = [0, *sorted(set(cuts)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges) if b > a]


def random_pieces(body: bytes, seed: int, max_piece: int = 48) -> list[bytes]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(body):
        n = rng.randint(1, max_piece)
        out.append(body[i:i + n])
        i += n
    return out


@dataclass
class Assembled:
    blocks: list[Block]
    """Closed blocks, then the ones left open (finished as partial), in seq order."""
    closed: int
    step: StepEnded | None


def assemble(api: str, events: Iterable[ProviderEvent]) -> Assembled:
    asm = Assembler(step=1, first_seq=0, origin=ORIGIN[api], provider=PROVIDER[api], snapshots=True)
    step: StepEnded | None = None
    for ev in events:
        asm.feed(ev)
        if isinstance(ev, StepEnded):
            step = ev
    closed = len(asm.finished)
    blocks = [*asm.finished, *asm.partial_blocks()]
    blocks.sort(key=lambda b: b.seq)
    return Assembled(blocks, closed, step)


# -- what the SDK assembled, in block terms ------------------------------------------------

def _loads_args(text: str | None) -> Any:
    return json.loads(text) if text and text.strip() else {}


def normalise(api: str, blocks: Sequence[Block]) -> list[tuple[Any, ...]]:
    """Blocks in a shape every API's expectation can be written in."""
    if api == "anthropic-messages":
        out: list[tuple[Any, ...]] = []
        for b in blocks:
            if isinstance(b, TextBlock):
                out.append(("text", b.text, len(b.citations or [])))
            elif isinstance(b, ThinkingBlock):
                out.append(("thinking", b.thinking, b.signature))
            elif isinstance(b, RedactedThinkingBlock):
                out.append(("redacted_thinking", b.data))
            elif isinstance(b, ToolUseBlock):
                out.append(("tool_use", b.tool_use_id, b.name, b.input))
            elif isinstance(b, ProviderBlock):
                out.append(("provider", b.data.get("type"), b.data.get("id") or b.data.get("tool_use_id")))
        return out
    # OpenAI: text of a message joined, as the SDK joins it
    text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
    thinking = "".join(b.thinking for b in blocks if isinstance(b, ThinkingBlock))
    calls = [(b.tool_use_id, b.name, b.input) for b in blocks if isinstance(b, ToolUseBlock)]
    provider = [b.data.get("type") for b in blocks if isinstance(b, ProviderBlock)]
    return [("text", text), ("thinking", thinking), ("calls", calls), ("provider", provider)]


def expected(c: Case) -> list[tuple[Any, ...]]:
    exp = c.meta["expected"]
    if c.api == "anthropic-messages":
        out: list[tuple[Any, ...]] = []
        for b in exp["content"]:
            t = b["type"]
            if t == "text":
                out.append(("text", b["text"], len(b.get("citations") or [])))
            elif t == "thinking":
                out.append(("thinking", b["thinking"], b["signature"]))
            elif t == "redacted_thinking":
                out.append(("redacted_thinking", b["data"]))
            elif t == "tool_use":
                out.append(("tool_use", b["id"], b["name"], b["input"]))
            else:
                out.append(("provider", t, b.get("id") or b.get("tool_use_id")))
        return out
    if c.api == "openai-chat":
        msg = exp["choices"][0]["message"]
        text = (msg.get("content") or "") + (msg.get("refusal") or "")
        thinking = msg.get("reasoning_content") or msg.get("reasoning") or ""
        calls = [(tc["id"], tc["function"]["name"], _loads_args(tc["function"]["arguments"]))
                 for tc in msg.get("tool_calls") or []]
        return [("text", text), ("thinking", thinking), ("calls", calls), ("provider", [])]
    return responses_view(exp["output"])


def responses_view(output: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    text, thinking, calls, provider = [], [], [], []
    for item in output:
        t = item.get("type")
        if t == "message":
            text.extend(p.get("text") or p.get("refusal") or "" for p in item.get("content") or [])
        elif t == "reasoning":
            parts = [p["text"] for p in item.get("summary") or []] or [
                p["text"] for p in item.get("content") or [] if p.get("type") == "reasoning_text"]
            thinking.append("\n\n".join(parts))
        elif t == "function_call":
            calls.append((item["call_id"], item["name"], _loads_args(item.get("arguments"))))
        else:
            provider.append(t)
    return [("text", "".join(text)), ("thinking", "".join(thinking)), ("calls", calls), ("provider", provider)]


def final_response_output(body: bytes) -> list[dict[str, Any]]:
    """The output list of the stream's own final event (for cases the SDK could not finish)."""
    decoder = SSEDecoder()
    last: dict[str, Any] | None = None
    for sse in decoder.feed(body):
        if sse.data.strip() == "[DONE]":
            continue
        ev = json.loads(sse.data)
        if ev.get("type") in ("response.completed", "response.incomplete"):
            last = ev["response"]
    assert last is not None
    return list(last.get("output") or [])


# -- the request turnstream sends next -----------------------------------------------------

TOOL_SPEC = ToolSpec("any_tool", "a tool", {"type": "object"})


def follow_up_body(api: str, blocks: Sequence[Block], *, model: str = "fixture") -> dict[str, Any]:
    """The next request after a step that ended in tool calls: one result per call."""
    calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
    seq = max((b.seq for b in blocks), default=-1) + 1
    results = [ToolResultBlock(seq=seq + i, step=1, tool_use_id=c.tool_use_id, content=f"result of {c.name}")
               for i, c in enumerate(calls)]
    messages, _ = repair(turn_messages("question", [*blocks, *results]), ORIGIN[api])
    thinking = any(isinstance(b, ThinkingBlock | RedactedThinkingBlock) for b in blocks)
    req = ModelRequest(model=model, messages=messages, system="be brief", tools=[TOOL_SPEC],
                       thinking_budget=2048 if thinking and api == "anthropic-messages" else None)
    if api == "anthropic-messages":
        return anthropic.request_body(req)
    if api == "openai-chat":
        return openai_chat.request_body(req)
    return openai_responses.request_body(req)


def validator(api: str) -> Any:
    return {"anthropic-messages": anthropic_errors, "openai-chat": openai_chat_errors,
            "openai-responses": openai_responses_errors}[api]


def inputs_sent(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """Tool-call id → input, as the request carries them (arguments parsed once)."""
    out: dict[str, Any] = {}
    if api == "anthropic-messages":
        for m in body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_use":
                    out[b["id"]] = b["input"]
    elif api == "openai-chat":
        for m in body["messages"]:
            for tc in m.get("tool_calls") or []:
                out[tc["id"]] = json.loads(tc["function"]["arguments"])
    else:
        for item in body["input"]:
            if item.get("type") == "function_call":
                out[item["call_id"]] = json.loads(item["arguments"])
    return out
