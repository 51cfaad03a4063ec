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

from .errors import InvalidValue


def check_answer(schema: dict[str, Any], answer: dict[str, Any]) -> None:
    """``InvalidValue`` (field ``content``, ``path`` the property) when ``answer`` does not
    fit ``schema``."""
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError, best_match

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return
    error = best_match(cls(schema).iter_errors(answer))
    if error is None:
        return
    path: list[str | int] = list(error.absolute_path)
    if error.validator == "required" and not path:
        missing = next((name for name in error.validator_value if name not in answer), None)
        path = [missing] if isinstance(missing, str) else []
    raise InvalidValue("content", f"{error.message} (the question's requested_schema)", path=tuple(path))


__all__ = ["check_answer"]
