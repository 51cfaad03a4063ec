"""``elicitation.check_answer``: the answer to a tool's question against its requested_schema."""

from __future__ import annotations

import pytest

from turnstream.elicitation import check_answer, check_field
from turnstream.errors import InvalidValue
from turnstream.schema_check import check

SCHEMA = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1}}}


def test_a_fitting_answer_passes_and_a_missing_field_is_named() -> None:
    check_answer(SCHEMA, {"name": "Ann", "tags": ["a"]})
    with pytest.raises(InvalidValue) as err:
        check_answer(SCHEMA, {"tags": ["a"]})
    assert (err.value.field, err.value.path) == ("content", ("name",))
    with pytest.raises(InvalidValue) as err:
        check_answer(SCHEMA, {"name": "Ann", "tags": ["a", "c"]})
    assert err.value.path == ("tags", 1) and "'c' is not one of ['a', 'b']" in err.value.message


def test_a_schema_that_is_not_valid_is_not_held_against_the_user() -> None:
    check_answer({"type": "object", "properties": {"n": {"type": "integr"}}}, {"n": "x"})


FORMATS = {"type": "object", "properties": {
    "email": {"type": "string", "format": "email"}, "birthdate": {"type": "string", "format": "date"},
    "count": {"type": "integer", "minimum": 1, "maximum": 100}, "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
    "other": {"type": "string", "format": "not-a-format-anyone-checks"}}}


def test_email_and_date_formats_are_checked_and_an_unknown_format_is_let_through() -> None:
    check_answer(FORMATS, {"email": "ann@example.com", "birthdate": "1990-04-01", "other": "anything"})
    for answer, words in (({"email": "nope"}, "'nope' is not a 'email'"),
                          ({"birthdate": "yesterday"}, "'yesterday' is not a 'date'"),
                          ({"birthdate": "2024-02-30"}, "'2024-02-30' is not a 'date'")):
        with pytest.raises(InvalidValue) as err:
            check_answer(FORMATS, answer)
        assert (err.value.field, err.value.path) == ("content", (next(iter(answer)),)), answer
        assert words in err.value.message, err.value.message


def test_format_is_checked_only_for_the_elicitation_not_for_every_schema_check() -> None:
    check({"type": "string", "format": "email"}, "nope", "value")  # schema_check alone: formats not asked for
    with pytest.raises(InvalidValue):
        check({"type": "string", "format": "email"}, "nope", "value", formats=["email"])


def test_one_field_is_checked_alone_with_the_bare_reason() -> None:
    check_field(FORMATS, "count", 100)
    check_field(SCHEMA, "tags", ["a"])  # "name" is required, but only "tags" is looked at
    check_field(FORMATS, "no-such-field", 1)
    for name, value, words in (("count", 500, "500 is greater than the maximum of 100"),
                               ("count", 0, "0 is less than the minimum of 1"),
                               ("code", "abcd", "'abcd' does not match '^[A-Z]{3}$'"),
                               ("email", "nope", "'nope' is not a 'email'")):
        with pytest.raises(InvalidValue) as err:
            check_field(FORMATS, name, value)
        assert err.value.path == (name,) and err.value.message == words, err.value.message


def test_a_field_behind_a_ref_is_checked_with_the_schemas_definitions() -> None:
    schema = {"type": "object", "$defs": {"small": {"type": "integer", "maximum": 3}},
              "properties": {"n": {"$ref": "#/$defs/small"}}}
    check_field(schema, "n", 3)
    with pytest.raises(InvalidValue) as err:
        check_field(schema, "n", 4)
    assert err.value.path == ("n",)
