"""The providers' transcript rules, as a checker that answers with their exact messages.

Used by the mock provider (it rejects what the real API would reject, with the same text)
and by tests (a repaired transcript must pass). Messages as in PROVIDER-FACTS.md.
"""

from __future__ import annotations

from typing import Any


def _content(m: dict[str, Any]) -> list[dict[str, Any]]:
    c = m.get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    return list(c or [])


def anthropic_errors(body: dict[str, Any]) -> str | None:
    """The first rule a Messages API request breaks, as the API words it, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return "messages.0.role: first message must use the \"user\" role"
    for i, m in enumerate(messages):
        blocks = _content(m)
        if m["role"] == "assistant":
            ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if not ids:
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            nxt_blocks = _content(nxt) if nxt is not None and nxt.get("role") == "user" else []
            result_ids = [b.get("tool_use_id") for b in nxt_blocks if b.get("type") == "tool_result"]
            missing = [x for x in ids if x not in result_ids]
            if missing:
                return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        f"{', '.join(str(x) for x in missing)}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message.")
            lead = 0
            for b in nxt_blocks:
                if b.get("type") != "tool_result":
                    break
                lead += 1
            if lead < len(ids):
                return (f"Did not find {len(ids)} tool_result block(s) at the beginning of this message. "
                        "Messages following tool_use blocks must begin with a matching number of tool_result blocks.")
        else:
            prev = messages[i - 1] if i > 0 else None
            prev_ids = [b.get("id") for b in _content(prev) if b.get("type") == "tool_use"] if (
                prev is not None and prev.get("role") == "assistant") else []
            seen: set[str] = set()
            for j, b in enumerate(blocks):
                if b.get("type") != "tool_result":
                    continue
                tid = b.get("tool_use_id")
                if tid not in prev_ids or tid in seen:
                    return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{tid}. Each `tool_result` block must have a corresponding `tool_use` block in the "
                            "previous message.")
                seen.add(str(tid))
    last_assistant = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None)
    if last_assistant is not None:
        blocks = _content(messages[last_assistant])
        has_tool = any(b.get("type") == "tool_use" for b in blocks)
        is_final = last_assistant == len(messages) - 1
        if thinking_on and has_tool and blocks and blocks[0].get("type") not in ("thinking", "redacted_thinking"):
            return (f"messages.{last_assistant}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must start "
                    "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).")
        if not thinking_on and is_final and any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks):
            return "When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`."
    return None
