"""The structured-output schema each API is sent (``providers/json_schema.py``): for random
nested pydantic models, the schema is one the mock's copy of the API's rules accepts, and
every valid answer of the model is still a valid answer of that schema (nothing the model
takes was made impossible); then the shapes one by one, and the mock's refusals."""

from __future__ import annotations

import datetime
import itertools
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

from turnstream.errors import InvalidValue
from turnstream.mock.schema_rules import anthropic_schema_errors, openai_strict_schema_errors
from turnstream.providers.base import OutputFormat
from turnstream.providers.json_schema import (
    anthropic_output,
    anthropic_schema,
    openai_output,
    openai_strict_schema,
)

Spec = tuple[Any, dict[str, Any], st.SearchStrategy[Any]]
"""A field: its annotation, its ``Field`` arguments and a strategy for its valid JSON values."""
_names = itertools.count()


@st.composite
def _bounded_int(draw: st.DrawFn) -> Spec:
    lo = draw(st.integers(-50, 50))
    hi = draw(st.integers(lo, lo + 100))
    return int, {"ge": lo, "le": hi}, st.integers(lo, hi)


@st.composite
def _short_text(draw: st.DrawFn) -> Spec:
    n = draw(st.integers(1, 20))
    return str, {"max_length": n, "min_length": 1}, st.text(min_size=1, max_size=n)


SCALARS: st.SearchStrategy[Spec] = st.one_of(
    st.just((int, {}, st.integers())),
    _bounded_int(),
    st.just((float, {"description": "a measure"}, st.floats(allow_nan=False, allow_infinity=False))),
    st.just((bool, {}, st.booleans())),
    st.just((str, {}, st.text(max_size=8))),
    _short_text(),
    st.just((Literal["a", "b"], {}, st.sampled_from(["a", "b"]))),
    st.just((datetime.date, {}, st.dates().map(lambda d: d.isoformat()))),
)


def _model(fields: dict[str, Spec]) -> Spec:
    model = create_model(f"M{next(_names)}", **{name: (ann, Field(**kw)) for name, (ann, kw, _) in fields.items()})
    values = st.fixed_dictionaries({name: v for name, (_, _, v) in fields.items()})
    return model, {}, values


def _compound(child: st.SearchStrategy[Spec]) -> st.SearchStrategy[Spec]:
    def listed(s: Spec, k: int) -> Spec:
        return list[s[0]], {"min_length": k}, st.lists(s[2], min_size=k, max_size=k + 2)

    def optional(s: Spec) -> Spec:
        return s[0] | None, {"default": None, "description": "when known"}, st.none() | s[2]

    def described(s: Spec) -> Spec:
        return s[0], {**s[1], "description": "the part that matters"}, s[2]

    names = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
    return st.one_of(
        st.builds(listed, child, st.integers(0, 3)),
        st.builds(optional, child),
        st.dictionaries(names, child, min_size=1, max_size=3).map(_model).map(described),
    )


MODELS = st.dictionaries(st.text(alphabet="xyz", min_size=1, max_size=4),
                         st.recursive(SCALARS, _compound, max_leaves=6), min_size=1, max_size=4).map(_model)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MODELS, st.data())
def test_every_model_becomes_a_schema_each_api_takes_and_that_takes_every_valid_answer(
        spec: Spec, data: st.DataObject) -> None:
    model, _, values = spec
    schema = model.model_json_schema()
    for_anthropic = anthropic_schema(schema)
    for_openai = openai_strict_schema(schema)
    assert anthropic_schema_errors(for_anthropic) is None
    assert openai_strict_schema_errors(for_openai, "M") is None
    for _ in range(3):
        answer = data.draw(values)
        model.model_validate(answer)  # a valid answer of the model (the strategy's own check)
        jsonschema.Draft202012Validator(for_anthropic).validate(answer)
        jsonschema.Draft202012Validator(for_openai).validate(answer)


class Inner(BaseModel):
    n: int = Field(ge=0, le=9)


class Outer(BaseModel):
    first: Inner = Field(description="the first one")
    second: Inner | None = None
    label: str = Field(default="x", max_length=5, pattern="^[a-z]+$")


def test_keywords_an_api_does_not_take_are_described_and_references_with_more_are_written_out() -> None:
    a = anthropic_schema(Outer.model_json_schema())
    first = a["properties"]["first"]
    assert first["description"] == "the first one" and first["additionalProperties"] is False
    assert first["properties"]["n"] == {"title": "N", "type": "integer", "description": '{maximum: 9, minimum: 0}'}
    assert a["properties"]["second"]["anyOf"][0] == {"$ref": "#/$defs/Inner"}
    assert a["required"] == ["first"]  # Anthropic keeps what may be left out
    assert a["properties"]["label"]["description"] == '{default: "x", maxLength: 5, pattern: "^[a-z]+$"}'
    o = openai_strict_schema(Outer.model_json_schema())
    assert o["required"] == ["first", "second", "label"]  # strict: every property, optional ones nullable already
    assert o["properties"]["label"]["pattern"] == "^[a-z]+$" and o["$defs"]["Inner"]["properties"]["n"]["maximum"] == 9
    assert Outer.model_json_schema()["properties"]["first"] == {"$ref": "#/$defs/Inner", "description": "the first one"}


def test_a_definition_written_out_at_every_use_is_left_out_of_defs() -> None:
    class Only(BaseModel):
        inner: Inner = Field(description="described, so written out")

    assert "$defs" not in anthropic_schema(Only.model_json_schema())


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Tally(BaseModel):
    counts: dict[str, int]


class Anything(BaseModel):
    value: Any


class Pair(BaseModel):
    both: tuple[int, str]


def test_recursion_is_openais_only_and_free_mappings_any_values_and_tuples_are_nobodys() -> None:
    with pytest.raises(InvalidValue, match="recursive"):
        anthropic_schema(Node.model_json_schema())
    o = openai_strict_schema(Node.model_json_schema())
    assert o["type"] == "object" and o["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert openai_strict_schema_errors(o, "Node") is None
    for model, why in ((Tally, "properties.counts: a mapping with free keys"),
                       (Anything, "properties.value: a value of any type"), (Pair, "properties.both: a tuple")):
        with pytest.raises(InvalidValue, match=why):
            anthropic_schema(model.model_json_schema())
        schema, strict = openai_output(OutputFormat(model.__name__, model.model_json_schema()))
        assert strict is False and schema == model.model_json_schema()


def test_anthropics_adapter_fails_the_step_with_what_it_cannot_ask() -> None:
    from turnstream.errors import ProviderError

    with pytest.raises(ProviderError, match=r"\(Tally\) cannot be asked .*free keys") as caught:
        anthropic_output(OutputFormat("Tally", Tally.model_json_schema()))
    assert caught.value.retryable is False


def test_the_mocks_rules_refuse_what_the_apis_refuse_in_their_words() -> None:
    closed = {"type": "object", "properties": {}, "additionalProperties": False}
    assert anthropic_schema_errors(closed) is None
    assert anthropic_schema_errors({**closed, "additionalProperties": True}) == (
        "output_config.format.schema: For 'object' type, 'additionalProperties: true' is not supported. "
        "Please set 'additionalProperties' to false")
    with_n = {**closed, "properties": {"n": {"type": "integer", "minimum": 1}}}
    assert anthropic_schema_errors(with_n) == (
        "output_config.format.schema: For 'integer' type, property 'minimum' is not supported")
    many = {**closed, "properties": {"a": {"type": "array", "items": {"type": "string"}, "minItems": 2}}}
    assert anthropic_schema_errors(many) == (
        "output_config.format.schema: For 'array' type, 'minItems' values other than 0 or 1 are not supported")
    assert "Recursive" in (anthropic_schema_errors(Node.model_json_schema()) or "")
    strict = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
              "required": ["a"], "additionalProperties": False}
    assert openai_strict_schema_errors(strict, "R") == (
        "Invalid schema for response_format 'R': In context=(), 'required' is required to be supplied and to be an "
        "array including every key in properties. Missing 'b'.")
    nested = {**closed, "required": ["x"], "properties": {"x": {"type": "object", "properties": {}}}}
    assert openai_strict_schema_errors(nested, "R") == (
        "Invalid schema for response_format 'R': In context=('properties', 'x'), 'additionalProperties' is "
        "required to be supplied and to be false.")
    ref = {**closed, "required": ["x"], "properties": {"x": {"$ref": "#/$defs/X", "description": "d"}},
           "$defs": {"X": closed}}
    assert "$ref cannot have keywords {'description'}" in (openai_strict_schema_errors(ref, "R") or "")
