"""The providers' transcript rules, as a checker that answers with their exact messages.

Used by the mock provider (it rejects what the real API would reject, with the same text)
and by tests (a repaired transcript must pass). Messages as in PROVIDER-FACTS.md.
"""

from __future__ import annotations

import re
from typing import Any

from .media_rules import (
    anthropic_content_errors,
    content_of,
    openai_chat_content_errors,
    openai_responses_content_errors,
)
from .schema_rules import anthropic_schema_errors, openai_strict_schema_errors

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _schema_errors(schema: Any, where: str, name: str, strict: Any = False) -> str | None:
    """A structured-output schema: a JSON Schema object whose root is an object; for OpenAI
    with ``strict`` true, in the subset strict mode takes (``schema_rules.py``)."""
    if not isinstance(schema, dict):
        return f"{where}: Field required"
    if schema.get("type") != "object":
        return (f"Invalid schema for response_format '{name}': schema must be a JSON Schema of 'type: \"object\"', "
                f"got 'type: \"{schema.get('type')}\"'.")
    return openai_strict_schema_errors(schema, name) if strict is True else None


def anthropic_output_errors(body: dict[str, Any]) -> str | None:
    """``output_config.format`` (structured outputs): a ``json_schema`` with its ``schema``, in
    the subset Anthropic takes (``schema_rules.py``)."""
    config = body.get("output_config")
    if config is None:
        return None
    if not isinstance(config, dict):
        return "output_config: Input should be an object"
    fmt = config.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return "output_config.format.type: Input should be 'json_schema'"
    schema = fmt.get("schema")
    problem = _schema_errors(schema, "output_config.format.schema", "output")
    return problem if problem or not isinstance(schema, dict) else anthropic_schema_errors(schema)


def openai_chat_output_errors(body: dict[str, Any]) -> str | None:
    """``response_format``: ``text``, ``json_object`` or ``json_schema`` with a name and schema."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return (f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object', and 'json_schema'.")
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict):
        return "Missing required parameter: 'response_format.json_schema'."
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return f"Invalid 'response_format.json_schema.name': string does not match pattern. Got '{name}'."
    return _schema_errors(spec.get("schema"), "response_format.json_schema.schema", name, spec.get("strict"))


def openai_responses_output_errors(body: dict[str, Any]) -> str | None:
    """``text.format``: ``text``, ``json_object`` or ``json_schema`` with a name and schema."""
    text = body.get("text")
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object', and 'json_schema'."
    name = fmt.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        return "Missing required parameter: 'text.format.name'."
    return _schema_errors(fmt.get("schema"), "text.format.schema", name, fmt.get("strict"))


MAX_BREAKPOINTS = 4
"""Anthropic's limit on blocks with ``cache_control`` in one request (tools, system and messages together)."""
CACHE_TTLS = ("5m", "1h")


def cache_breakpoints(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every block of an Anthropic request that carries ``cache_control``, with its path,
    in the order the API reads the prompt: tools, then system, then messages."""
    found: list[tuple[str, dict[str, Any]]] = []
    for i, t in enumerate(body.get("tools") or []):
        if isinstance(t, dict) and "cache_control" in t:
            found.append((f"tools.{i}", t))
    system = body.get("system")
    if isinstance(system, list):
        for i, b in enumerate(system):
            if isinstance(b, dict) and "cache_control" in b:
                found.append((f"system.{i}", b))
    for i, m in enumerate(body.get("messages") or []):
        if isinstance(m, dict):
            for j, b in enumerate(content_of(m)):
                if isinstance(b, dict) and "cache_control" in b:
                    found.append((f"messages.{i}.content.{j}", b))
    return found


def _cache_errors(body: dict[str, Any]) -> str | None:
    """The prompt-cache rules: at most four breakpoints; none on a thinking block or an
    empty text block; each ``{"type": "ephemeral"}`` with an optional ``ttl`` of 5m or 1h.
    The count's message is the API's own; the others are worded as its validation errors."""
    marks = cache_breakpoints(body)
    if len(marks) > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}."
    for path, b in marks:
        kind = b.get("type")
        if kind in ("thinking", "redacted_thinking"):
            return f"{path}.{kind}.cache_control: Extra inputs are not permitted"
        if kind == "text" and not b.get("text"):
            return f"{path}.text: cache_control cannot be set for empty text blocks"
        cc = b["cache_control"]
        if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
            return f"{path}.cache_control.type: Input should be 'ephemeral'"
        if cc.get("ttl") is not None and cc["ttl"] not in CACHE_TTLS:
            return f"{path}.cache_control.ttl: Input should be '5m' or '1h'"
    return None


def anthropic_errors(body: dict[str, Any]) -> str | None:
    """The first rule a Messages API request breaks, as the API words it, or None."""
    problem = anthropic_output_errors(body)
    if problem:
        return problem
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if problem := anthropic_content_errors(messages):
        return problem
    cache_problem = _cache_errors(body)
    if cache_problem:
        return cache_problem
    thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return "messages.0.role: first message must use the \"user\" role"
    for i, m in enumerate(messages):
        blocks = content_of(m)
        if m["role"] == "assistant":
            ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if not ids:
                continue
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            nxt_blocks = content_of(nxt) if nxt is not None and nxt.get("role") == "user" else []
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
            prev_ids = [b.get("id") for b in content_of(prev) if b.get("type") == "tool_use"] if (
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
        blocks = content_of(messages[last_assistant])
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
    problem = openai_chat_output_errors(body)
    if problem:
        return problem
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "[] is too short - 'messages'"
    if problem := openai_chat_content_errors(messages):
        return problem
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
    problem = openai_responses_output_errors(body)
    if problem:
        return problem
    items = body.get("input")
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return "Invalid type for 'input': expected one of a string or array of input items."
    if problem := openai_responses_content_errors(items):
        return problem
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
