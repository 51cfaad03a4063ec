"""A pydantic JSON Schema in the subset each API's structured outputs take
(docs/structured-output.md#the-schema-each-api-gets).

Both APIs decode against a grammar built from the schema, so both want every object closed
(``additionalProperties: false``) and refuse keywords their grammar cannot hold. Anthropic
refuses numeric bounds, string lengths, array sizes beyond ``minItems`` 0 or 1, and
recursive schemas; OpenAI's strict mode wants every property in ``required``, takes bounds
and patterns, and follows recursion. A keyword that an API does not take is not lost: it is
written into the node's ``description`` (the model still reads it), and the answer is
validated against the pydantic model itself, which enforces all of it.

What neither can express (a mapping with free keys, a value of any type, a tuple) raises
``InvalidValue`` (field ``output``) naming the spot: Anthropic's adapter fails the step with it, OpenAI's sends
the schema as it is with ``strict: false``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from ..errors import InvalidValue, ProviderError
from .base import OutputFormat

Dialect = Literal["anthropic", "openai"]

ANTHROPIC_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4",
                               "ipv6", "uuid"})
OPENAI_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})

_COMMON = frozenset({"type", "description", "title", "enum", "const"})
_KEPT: dict[Dialect, dict[str, frozenset[str]]] = {
    "anthropic": {"object": frozenset(), "array": frozenset(), "string": frozenset(),
                  "integer": frozenset(), "number": frozenset()},
    "openai": {"object": frozenset(), "array": frozenset({"minItems", "maxItems"}),
               "string": frozenset({"pattern"}),
               "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
               "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})},
}
"""Per dialect and type, the keywords kept besides the structural ones (``_COMMON``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``format``, ``minItems``
0/1 for Anthropic)."""
_DROPPED = frozenset({"$schema", "$id", "$comment", "discriminator", "examples", "readOnly", "writeOnly",
                      "deprecated"})
"""Annotations with no bearing on the answer: left out rather than described."""


def _unsupported(path: Iterable[str | int], why: str) -> InvalidValue:
    """What the API's structured outputs cannot express, and where it sits in the schema."""
    return InvalidValue("output", f"{'.'.join(map(str, path)) or '(root)'}: {why}")


def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as Anthropic's ``output_config.format.schema`` takes it."""
    return _Normaliser("anthropic", schema).root()


def openai_strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as OpenAI's ``json_schema`` with ``strict: true`` takes it."""
    return _Normaliser("openai", schema).root()


def anthropic_output(output: OutputFormat) -> dict[str, Any]:
    """The schema Anthropic's adapter sends; a ``ProviderError`` (not retried) for one it cannot."""
    try:
        return anthropic_schema(output.schema)
    except InvalidValue as exc:
        raise ProviderError(f"the answer's schema ({output.name}) cannot be asked of Anthropic's structured "
                            f"outputs: {exc}", error_type="invalid_request_error") from None


def openai_output(output: OutputFormat) -> tuple[dict[str, Any], bool]:
    """The schema OpenAI's adapters send and whether it is strict: the strict form when the
    schema has one, else the schema as it is with ``strict: false``."""
    try:
        return openai_strict_schema(output.schema), True
    except InvalidValue:
        return output.schema, False


def recursive_defs(defs: dict[str, Any]) -> set[str]:
    """The names among ``$defs`` that refer back to themselves, directly or through others."""
    edges = {name: set(_refs(d)) & defs.keys() for name, d in defs.items()}
    found: set[str] = set()
    for start in edges:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            n = todo.pop()
            if n == start:
                found.add(start)
                break
            if n not in seen:
                seen.add(n)
                todo.extend(edges.get(n, ()))
    return found


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            yield ref[len("#/$defs/"):]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


class _Normaliser:
    def __init__(self, dialect: Dialect, schema: dict[str, Any]) -> None:
        self.dialect = dialect
        defs = schema.get("$defs")
        self.defs: dict[str, Any] = defs if isinstance(defs, dict) else {}
        self.recursive = recursive_defs(self.defs)
        self.schema = schema

    def root(self) -> dict[str, Any]:
        if self.recursive and self.dialect == "anthropic":
            raise _unsupported(["$defs", sorted(self.recursive)[0]], "a recursive schema (a model that contains "
                              "itself); Anthropic's structured outputs take none")
        body = {k: v for k, v in self.schema.items() if k != "$defs"}
        ref = body.pop("$ref", None)
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[len("#/$defs/"):] in self.defs:
            body = {**self.defs[ref[len("#/$defs/"):]], **body}  # a recursive model's root is its definition
        out = self.node(body, [])
        if out.get("type") != "object":
            raise _unsupported([], "the answer must be a JSON object")
        # The definitions the result still refers to (one written out at each use is left out).
        defs: dict[str, Any] = {}
        todo = list(_refs(out))
        while todo:
            name = todo.pop()
            if name not in defs:
                defs[name] = self.node(self.defs[name], ["$defs", name])
                todo.extend(_refs(defs[name]))
        if defs:
            out["$defs"] = dict(sorted(defs.items()))
        return out

    def node(self, node: Any, path: list[str | int]) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise _unsupported(path, "a schema that is not an object (true or false)")
        rest = dict(node)
        ref = rest.pop("$ref", None)
        if ref is not None:
            return self._ref(ref, rest, path)
        all_of = rest.pop("allOf", None)
        if isinstance(all_of, list) and len(all_of) == 1:
            return self.node({**all_of[0], **rest}, path)
        out: dict[str, Any] = {}
        for key in ("anyOf", "oneOf"):
            variants = rest.pop(key, None)
            if isinstance(variants, list):
                out["anyOf"] = [self.node(v, [*path, "anyOf", i]) for i, v in enumerate(variants)]
        if all_of is not None:
            raise _unsupported(path, "allOf with more than one schema")
        kind = rest.get("type")
        if isinstance(kind, list):
            raise _unsupported(path, "a list of types")
        if "anyOf" not in out and kind is None and "enum" not in rest and "const" not in rest:
            raise _unsupported(path, "a value of any type")
        for key in _COMMON:
            if key in rest:
                out[key] = rest.pop(key)
        if kind == "object":
            self._object(rest, out, path)
        elif kind == "array":
            self._array(rest, out, path)
        elif kind == "string" and "format" in rest:
            fmt = rest.pop("format")
            if fmt in (ANTHROPIC_FORMATS if self.dialect == "anthropic" else OPENAI_FORMATS):
                out["format"] = fmt
            else:
                rest["format"] = fmt
        kept = _KEPT[self.dialect].get(kind if isinstance(kind, str) else "", frozenset())
        for key in kept & rest.keys():
            out[key] = rest.pop(key)
        self._describe(out, rest)
        return out

    def _ref(self, ref: Any, siblings: dict[str, Any], path: list[str | int]) -> dict[str, Any]:
        if not isinstance(ref, str) or not ref.startswith("#/$defs/") or ref[len("#/$defs/"):] not in self.defs:
            raise _unsupported(path, f"a reference outside the schema's $defs ({ref!r})")
        name = ref[len("#/$defs/"):]
        if not siblings or name in self.recursive:
            # A recursive definition stays a reference (only OpenAI gets one), bare: neither
            # API takes keywords beside a $ref, so a description there is left out.
            return {"$ref": ref}
        # Neither API takes keywords beside a $ref: the definition is written out in place,
        # what stood beside the reference winning over the definition's own.
        return self.node({**self.defs[name], **siblings}, path)

    def _object(self, rest: dict[str, Any], out: dict[str, Any], path: list[str | int]) -> None:
        props = rest.pop("properties", None)
        extra = rest.pop("additionalProperties", None)
        if props is None and extra is not False:
            raise _unsupported(path, "a mapping with free keys (a dict); give it named fields, or make it a "
                              "list of key and value objects")
        props = props or {}
        out["properties"] = {k: self.node(v, [*path, "properties", k]) for k, v in props.items()}
        required = rest.pop("required", None)
        if self.dialect == "openai":
            out["required"] = list(props)
        elif required:
            out["required"] = list(required)
        out["additionalProperties"] = False

    def _array(self, rest: dict[str, Any], out: dict[str, Any], path: list[str | int]) -> None:
        if "prefixItems" in rest:
            raise _unsupported(path, "a tuple (items by position)")
        items = rest.pop("items", None)
        if items is None:
            raise _unsupported(path, "an array whose items have no schema")
        out["items"] = self.node(items, [*path, "items"])
        if self.dialect == "anthropic" and rest.get("minItems") in (0, 1):
            out["minItems"] = rest.pop("minItems")

    def _describe(self, out: dict[str, Any], rest: dict[str, Any]) -> None:
        """What the API does not take goes into the description, for the model to read."""
        said = {k: v for k, v in rest.items() if k not in _DROPPED}
        if said:
            note = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in said.items())
            out["description"] = f"{out['description']}\n\n{{{note}}}" if out.get("description") else f"{{{note}}}"


__all__ = ["anthropic_output", "anthropic_schema", "openai_output", "openai_strict_schema",
           "recursive_defs"]
