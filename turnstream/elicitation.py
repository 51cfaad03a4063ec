"""Checking the user's answer to a tool's question (an MCP elicitation) against the question's
``requested_schema``, with a JSON Schema library rather than by hand: a string where the
schema asks for an array, an empty array against ``minItems: 1``, a value outside an ``enum``
or past a ``maximum``, a string that is no ``format: email``, a missing ``required`` property
are each refused, naming the field, before anything reaches the MCP server. The terminal
chat's form runs the same check on each field as it is typed (``check_field``).

The schema is the server's (MCP restricts it to a flat object of strings, numbers, booleans,
enums and arrays of enums, but nothing here relies on that); one that is not a valid schema
is not held against the user, whose answer then passes as it is.

Of the string formats MCP allows (``FORMATS``), ``jsonschema`` checks ``email`` and ``date``
by itself; ``uri`` needs the ``rfc3987`` (or ``rfc3986-validator``) package and ``date-time``
the ``rfc3339-validator`` package. turnstream does not depend on those: where they are not
installed, those two formats are not checked.
"""

from __future__ import annotations

from typing import Any

from .schema_check import check

FORMATS = ("email", "uri", "date", "date-time")
_NOTE = " (the question's requested_schema)"


def check_answer(schema: dict[str, Any], answer: dict[str, Any]) -> None:
    """``InvalidValue`` (field ``content``, ``path`` the property) when ``answer`` does not
    fit ``schema``."""
    check(schema, answer, "content", note=_NOTE, formats=FORMATS)


def check_field(schema: dict[str, Any], name: str, value: Any) -> None:
    """``InvalidValue`` (field ``content``, ``path`` from ``name``) when the value of the one
    property ``name`` does not fit its place in ``schema``; the other properties, and whether
    they are required, are not looked at. The schema's ``$schema`` and its definitions are
    kept, so a ``$ref`` inside the property still resolves. The message is the bare reason
    (``500 is greater than the maximum of 100``), as a form shows it beside the field."""
    props = schema.get("properties")
    prop = props.get(name) if isinstance(props, dict) else None
    if not isinstance(prop, dict):
        return
    single = {k: v for k, v in schema.items() if k in ("$schema", "$id", "$defs", "definitions")}
    single |= {"type": "object", "properties": {name: prop}}
    check(single, {name: value}, "content", formats=FORMATS)


__all__ = ["FORMATS", "check_answer", "check_field"]
