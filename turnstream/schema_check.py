"""A JSON value checked against a JSON Schema with the ``jsonschema`` library: the answer to an
MCP server's question against its ``requested_schema`` (``elicitation.py``), an imported
notebook's top level against the schema the API document gives it (``notebook/ipynb.py``).
One refusal, ``InvalidValue`` naming the field and the place inside it."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .errors import InvalidValue


def check(schema: dict[str, Any], value: Any, field: str, *, note: str = "", formats: Collection[str] = ()) -> None:
    """``InvalidValue`` (``field``, ``path`` the place) when ``value`` does not fit ``schema``;
    ``note`` follows the message. A schema that is not valid is not held against the value.
    ``format`` is checked only for the names in ``formats`` that the installed ``jsonschema``
    can check by itself (``FormatChecker.checkers``); any other ``format`` is let through."""
    from jsonschema import FormatChecker, validators
    from jsonschema.exceptions import SchemaError, best_match

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return
    checker = FormatChecker([name for name in formats if name in FormatChecker.checkers])
    error = best_match(cls(schema, format_checker=checker).iter_errors(value))
    if error is None:
        return
    path: list[str | int] = list(error.absolute_path)
    if error.validator == "required" and not path and isinstance(value, dict):
        missing = next((name for name in error.validator_value if name not in value), None)
        path = [missing] if isinstance(missing, str) else []
    raise InvalidValue(field, f"{error.message}{note}", path=tuple(path))


__all__ = ["check"]
