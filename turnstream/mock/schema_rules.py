"""The structured-output schema rules of each API, as the mock provider checks them.

Split from ``validate.py`` (the transcript rules), which calls these per format. Messages
are the APIs' own where they were seen in the wild: Anthropic's ``For 'object' type,
'additionalProperties' must be explicitly set to false``, ``… 'additionalProperties: true'
is not supported …``, ``For 'integer' type, property 'minimum' is not supported``, ``For
'array' type, property 'maxItems' is not supported``, ``For 'array' type, 'minItems' values
other than 0 or 1 are not supported``; OpenAI's ``In context=(…), 'required' is required to
be supplied and to be an array including every key in properties. Missing '…'.`` and ``…
'additionalProperties' is required to be supplied and to be false.``. The others (a
recursive schema for Anthropic, an unknown format, a keyword OpenAI's strict mode does not
permit, ``$ref`` beside other keywords) are worded in the same style.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..providers.json_schema import ANTHROPIC_FORMATS, OPENAI_FORMATS, recursive_defs

Path = tuple[str, ...]

_ANTHROPIC_REFUSED = {
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "string": ("minLength", "maxLength"),
    "array": ("maxItems", "uniqueItems", "prefixItems", "contains"),
    "object": ("patternProperties", "minProperties", "maxProperties", "propertyNames"),
}
_OPENAI_REFUSED = ("minLength", "maxLength", "patternProperties", "unevaluatedProperties", "propertyNames",
                   "minProperties", "maxProperties", "unevaluatedItems", "contains", "minContains", "maxContains",
                   "uniqueItems")


def _nodes(schema: dict[str, Any], path: Path = ()) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every subschema with where it sits, the root first."""
    yield path, schema
    for key in ("properties", "$defs"):
        sub = schema.get(key)
        if isinstance(sub, dict):
            for name, s in sub.items():
                if isinstance(s, dict):
                    yield from _nodes(s, (*path, key, str(name)))
    for key in ("anyOf", "oneOf", "allOf"):
        sub = schema.get(key)
        if isinstance(sub, list):
            for i, s in enumerate(sub):
                if isinstance(s, dict):
                    yield from _nodes(s, (*path, key, str(i)))
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _nodes(items, (*path, "items"))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from _nodes(extra, (*path, "additionalProperties"))


def anthropic_schema_errors(schema: dict[str, Any]) -> str | None:
    """Why ``output_config.format.schema`` would be refused, or None."""
    where = "output_config.format.schema"
    defs = schema.get("$defs")
    if isinstance(defs, dict) and recursive_defs(defs):
        return f"{where}: Recursive schemas are not supported"
    for _, node in _nodes(schema):
        kind = node.get("type")
        if kind == "object" or "properties" in node:
            extra = node.get("additionalProperties")
            if extra is True:
                return (f"{where}: For 'object' type, 'additionalProperties: true' is not supported. "
                        "Please set 'additionalProperties' to false")
            if extra is not False:
                return f"{where}: For 'object' type, 'additionalProperties' must be explicitly set to false"
        if not isinstance(kind, str):
            continue
        for key in _ANTHROPIC_REFUSED.get(kind, ()):
            if key in node:
                return f"{where}: For '{kind}' type, property '{key}' is not supported"
        if kind == "array" and node.get("minItems", 0) not in (0, 1):
            return f"{where}: For 'array' type, 'minItems' values other than 0 or 1 are not supported"
        if kind == "string" and "format" in node and node["format"] not in ANTHROPIC_FORMATS:
            return f"{where}: For 'string' type, format '{node['format']}' is not supported"
    return None


def openai_strict_schema_errors(schema: dict[str, Any], name: str) -> str | None:
    """Why a ``json_schema`` with ``strict: true`` would be refused, or None."""
    for path, node in _nodes(schema):
        said = f"Invalid schema for response_format '{name}': In context={path!r}, "
        if "$ref" in node and len(node) > 1:
            return f"{said}$ref cannot have keywords {set(node) - {'$ref'}!r}."
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                return f"{said}'additionalProperties' is required to be supplied and to be false."
            required = node.get("required") or []
            missing = [k for k in node.get("properties") or {} if k not in required]
            if missing:
                return (f"{said}'required' is required to be supplied and to be an array including every key in "
                        f"properties. Missing '{missing[0]}'.")
        for key in _OPENAI_REFUSED:
            if key in node:
                return f"{said}'{key}' is not permitted."
        if node.get("type") == "string" and "format" in node and node["format"] not in OPENAI_FORMATS:
            return f"{said}'{node['format']}' is not a valid format."
    return None


__all__ = ["anthropic_schema_errors", "openai_strict_schema_errors"]
