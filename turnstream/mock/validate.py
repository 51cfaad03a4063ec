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


def openai_chat_errors(body: dict[str, Any]) -> str | None:
    """The first pairing rule a Chat Completions request breaks, as the API words it, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "[] is too short - 'messages'"
    pending: list[str] = []  # ids of the last assistant message's calls not answered yet
    answerable: set[str] = set()  # ids a tool message may answer here
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'tool', " \
                   "'function', and 'developer'."
        if role != "tool" and pending:
            return _unanswered(pending)
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in answerable:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        "message with 'tool_calls'.")
            answerable.discard(tid)
            if tid in pending:
                pending.remove(tid)
            continue
        answerable = set()
        if role == "assistant":
            for j, call in enumerate(m.get("tool_calls") or []):
                args = (call.get("function") or {}).get("arguments")
                if not isinstance(args, str):
                    return (f"Invalid type for 'messages[{i}].tool_calls[{j}].function.arguments': "
                            f"expected a string, but got {type(args).__name__} instead.")
                pending.append(str(call.get("id")))
            answerable = set(pending)
    return _unanswered(pending) if pending else None


def _unanswered(ids: list[str]) -> str:
    return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}")


_RESPONSES_INPUT_ONLY = ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                         "computer_call_output", "mcp_approval_response", "item_reference")


def openai_responses_errors(body: dict[str, Any]) -> str | None:
    """The first pairing rule a Responses request breaks, as the API words it, or None."""
    items = body.get("input")
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return "Invalid type for 'input': expected one of a string or array of input items."
    calls: dict[str, bool] = {}  # call_id -> answered
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"Invalid type for 'input[{i}]': expected an object."
        itype = item.get("type", "message")
        if itype == "reasoning":
            nxt = items[i + 1] if i + 1 < len(items) else None
            ntype = nxt.get("type", "message") if isinstance(nxt, dict) else None
            user_side = ntype in _RESPONSES_INPUT_ONLY or (
                ntype == "message" and isinstance(nxt, dict) and nxt.get("role") != "assistant")
            if ntype is None or ntype == "reasoning" or user_side:
                return (f"Item '{item.get('id')}' of type 'reasoning' was provided without its required "
                        "following item.")
        elif itype == "function_call":
            if not isinstance(item.get("arguments"), str):
                return f"Invalid type for 'input[{i}].arguments': expected a string."
            calls[str(item.get("call_id"))] = False
        elif itype == "function_call_output":
            cid = str(item.get("call_id"))
            if calls.get(cid) is not False:
                return f"No tool call found for function call output with call_id {cid}."
            calls[cid] = True
    for cid, answered in calls.items():
        if not answered:
            return f"No tool output found for function call {cid}."
    return None
