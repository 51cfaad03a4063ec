"""Checking the user's answer to a tool's question (an MCP elicitation) against the question's
``requested_schema``, with a JSON Schema library rather than by hand: a string where the
schema asks for an array, an empty array against ``minItems: 1``, a value outside an ``enum``,
a missing ``required`` property are each refused, naming the field, before anything reaches
the MCP server.

The schema is the server's (MCP restricts it to a flat object of strings, numbers, booleans,
enums and arrays of enums, but nothing here relies on that); one that is not a valid schema
is not held against the user, whose answer then passes as it is.
"""

from __future__ import annotations

from typing import Any

from .schema_check import check


def check_answer(schema: dict[str, Any], answer: dict[str, Any]) -> None:
    """``InvalidValue`` (field ``content``, ``path`` the property) when ``answer`` does not
    fit ``schema``."""
    check(schema, answer, "content", note=" (the question's requested_schema)")


__all__ = ["check_answer"]
