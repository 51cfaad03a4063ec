"""A server's question to the user, and the user's answer, between MCP and turnstream.

On a 2026-07-28 connection the question comes as the call's result, an
``InputRequiredResult``, which becomes ``InputNeeded`` (``input_needed``); the call is sent
again with the answer. On older ones it is a request in the middle of the call (``live.py``).
Either way the answer comes back as ``ToolContext.answer`` and goes to the server as an
``ElicitResult`` (``elicit_result``).
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt

from ..errors import InputNeeded, MCPServerError


def input_needed(server: str, result: mt.InputRequiredResult) -> InputNeeded | MCPServerError:
    """The first form elicitation of an ``InputRequiredResult`` from the MCP server named
    ``server`` as ``InputNeeded`` (the server asks any others on the next round); an error for
    what turnstream cannot answer."""
    for key, request in (result.input_requests or {}).items():
        if isinstance(request, mt.ElicitRequest) and isinstance(request.params, mt.ElicitRequestFormParams):
            state = {"server": server, "key": key, "request_state": result.request_state}
            return InputNeeded(request.params.message, dict(request.params.requested_schema), state)
    kinds = sorted({r.method for r in (result.input_requests or {}).values()})
    return MCPServerError(f"the MCP server {server!r} asked for input turnstream does not give "
                          f"({', '.join(kinds) or 'a state-only retry'})")


def elicit_result(answer: dict[str, Any]) -> mt.ElicitResult:
    """The user's answer (``ToolContext.answer``) as the MCP ``ElicitResult``."""
    action = answer.get("action", "decline")
    if action == "accept":
        return mt.ElicitResult(action="accept", content=answer.get("content") or {})
    return mt.ElicitResult(action="cancel" if action == "cancel" else "decline")


__all__ = ["elicit_result", "input_needed"]
