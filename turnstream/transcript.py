"""Stored blocks to the next request: build, check and repair (SPEC §5).

The same code serves every step of a live turn and the first step after a crash. Before a
provider call the transcript is made valid for every provider's pairing rules:

* a tool call without a result gets an ``is_error`` result saying it was interrupted;
* a result without its call (in the assistant message just before) is dropped;
* a duplicated call id or result keeps the first;
* results open the user message that follows their calls, in call order;
* neighbouring messages of the same role are merged;
* thinking, redacted thinking and provider-native blocks are sent only to the model that
  made them (``origin``), unmodified; thinking without a signature is never sent.

Each repair is logged (``turnstream.transcript``) and returned.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from .blocks import (
    Block,
    CompactionBlock,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserBlock,
)
from .providers.base import Message

log = logging.getLogger("turnstream.transcript")

RESUMED = "(conversation resumed)"
INTERRUPTED_RESULT = ("The tool call was interrupted before it produced a result "
                      "(the turn was cancelled or the server stopped). It may not have run.")


def turn_messages(user_input: str, blocks: Sequence[Block]) -> list[Message]:
    """One turn as messages: the user's input (with its attachments: the user blocks of step
    0), then per step the assistant's blocks and the user message carrying that step's tool
    results, followed by what the user sent while the step ran (its user blocks)."""
    out: list[Message] = [Message("user", [user_input])] if user_input else []
    by_step: dict[int, list[Block]] = {}
    for b in sorted(blocks, key=lambda b: b.seq):
        by_step.setdefault(b.step, []).append(b)
    for step in sorted(by_step):
        said = [b for b in by_step[step] if not isinstance(b, ToolResultBlock | UserBlock | CompactionBlock)]
        heard: list[Block] = [b for b in by_step[step] if isinstance(b, ToolResultBlock)]
        heard += [b for b in by_step[step] if isinstance(b, UserBlock)]
        if said:
            out.append(Message("assistant", list(said)))
        if heard:
            out.append(Message("user", list(heard)))
    return out


def _keep_for(block: Block | str, origin: str) -> bool:
    if isinstance(block, ThinkingBlock):
        return bool(block.signature) and block.origin == origin
    if isinstance(block, RedactedThinkingBlock | ProviderBlock):
        return block.origin == origin
    if isinstance(block, TextBlock):
        return bool(block.text)
    if isinstance(block, UserBlock):
        return bool(block.text or block.attachments)
    return not (isinstance(block, str) and not block)


def repair(messages: Iterable[Message], origin: str) -> tuple[list[Message], list[str]]:
    """A transcript every provider accepts, and the list of repairs made to get it."""
    repairs: list[str] = []
    msgs: list[Message] = []
    for m in messages:
        kept = [b for b in m.blocks if _keep_for(b, origin)]
        if len(kept) != len(m.blocks):
            dropped = len(m.blocks) - len(kept)
            if any(isinstance(b, ThinkingBlock | RedactedThinkingBlock | ProviderBlock) for b in m.blocks):
                log.debug("left out %d block(s) made by another model or empty", dropped)
        if not kept:
            continue
        if msgs and msgs[-1].role == m.role:
            msgs[-1] = Message(m.role, [*msgs[-1].blocks, *kept])
            continue
        msgs.append(Message(m.role, kept))

    seen_calls: set[str] = set()
    out: list[Message] = []
    i = 0
    while i < len(msgs):
        m = msgs[i]
        if m.role == "assistant":
            blocks: list[Block | str] = []
            for b in m.blocks:
                if isinstance(b, ToolUseBlock):
                    if b.tool_use_id in seen_calls:
                        repairs.append(f"dropped a second tool call with id {b.tool_use_id}")
                        continue
                    seen_calls.add(b.tool_use_id)
                blocks.append(b)
            calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
            if not blocks:
                i += 1
                continue
            out.append(Message("assistant", blocks))
            nxt = msgs[i + 1] if i + 1 < len(msgs) and msgs[i + 1].role == "user" else None
            if calls or nxt is not None:
                user_blocks = list(nxt.blocks) if nxt is not None else []
                out_user = _pair_results(calls, user_blocks, repairs)
                if out_user:
                    out.append(Message("user", out_user))
                i += 2 if nxt is not None else 1
                continue
            i += 1
            continue
        # a user message not right after an assistant message: no result may stand in it
        kept_user: list[Block | str] = []
        for b in m.blocks:
            if isinstance(b, ToolResultBlock):
                repairs.append(f"dropped a tool result without its call: {b.tool_use_id}")
                continue
            kept_user.append(b)
        if kept_user:
            if out and out[-1].role == "user":
                out[-1] = Message("user", [*out[-1].blocks, *kept_user])
            else:
                out.append(Message("user", kept_user))
        i += 1

    merged: list[Message] = []
    for m in out:
        if merged and merged[-1].role == m.role:
            merged[-1] = Message(m.role, [*merged[-1].blocks, *m.blocks])
        else:
            merged.append(m)
    out = merged
    if out and out[0].role == "assistant":
        out.insert(0, Message("user", [RESUMED]))
        repairs.append("added a user message before a leading assistant message")
    for r in repairs:
        log.warning("transcript repair: %s", r)
    return out, repairs


def _pair_results(calls: list[ToolUseBlock], user_blocks: list[Block | str], repairs: list[str]) -> list[Block | str]:
    """The user message after ``calls``: one result per call, in call order, then the rest."""
    ids = {c.tool_use_id for c in calls}
    found: dict[str, ToolResultBlock] = {}
    rest: list[Block | str] = []
    for b in user_blocks:
        if isinstance(b, ToolResultBlock):
            if b.tool_use_id not in ids:
                repairs.append(f"dropped a tool result without its call: {b.tool_use_id}")
            elif b.tool_use_id in found:
                repairs.append(f"dropped a duplicate tool result for {b.tool_use_id}")
            else:
                found[b.tool_use_id] = b
        else:
            rest.append(b)
    results: list[Block | str] = []
    for c in calls:
        r = found.get(c.tool_use_id)
        if r is None:
            repairs.append(f"closed out the dangling tool call {c.tool_use_id} ({c.name}) as interrupted")
            r = ToolResultBlock(tool_use_id=c.tool_use_id, content=INTERRUPTED_RESULT, is_error=True,
                                step=c.step)
        results.append(r)
    if results and any(isinstance(b, ToolResultBlock) for b in user_blocks):
        order = list(dict.fromkeys(b.tool_use_id for b in user_blocks
                                   if isinstance(b, ToolResultBlock) and b.tool_use_id in ids))
        if order != [c.tool_use_id for c in calls if c.tool_use_id in order] or (
                rest and user_blocks and not isinstance(user_blocks[0], ToolResultBlock)):
            repairs.append("put tool results first, in call order")
    return [*results, *rest]


def latest_compaction(history: Sequence[tuple[str, Sequence[Block]]]) -> tuple[int, CompactionBlock | None]:
    """The newest summary of the conversation's first turns, and how many turns of
    ``history`` it stands for (never the turn that holds it, nor a later one)."""
    for i in range(len(history) - 1, -1, -1):
        for b in reversed(history[i][1]):
            if isinstance(b, CompactionBlock):
                return min(b.covers, i), b
    return 0, None


def summary_message(c: CompactionBlock, covers: int) -> Message:
    """What the model reads in place of the turns a summary stands for."""
    return Message("user", [f"[A summary of the first {covers} turns of this conversation, written to fit the "
                            f"model's context window; the turns themselves are kept but not sent:]\n\n{c.summary}"])


def build(history: Iterable[tuple[str, Sequence[Block]]], origin: str) -> tuple[list[Message], list[str]]:
    """Messages for the next call from (input, blocks) of each turn, oldest first, repaired.
    The turns the newest summary stands for are sent as that summary (``CompactionBlock``)."""
    turns = history if isinstance(history, Sequence) else list(history)
    covers, summary = latest_compaction(turns)
    raw: list[Message] = [summary_message(summary, covers)] if summary is not None else []
    for user_input, blocks in turns[covers:]:
        raw.extend(turn_messages(user_input, blocks))
    return repair(raw, origin)
