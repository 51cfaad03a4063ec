"""``elicitation.check_answer``: the answer to a tool's question against its requested_schema."""

from __future__ import annotations

import pytest

from turnstream.elicitation import check_answer
from turnstream.errors import InvalidValue

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
