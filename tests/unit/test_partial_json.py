"""The incremental partial-JSON parser: any prefix gives a usable value, the whole gives the
document, and the work per byte does not grow with the input."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from turnstream.partial_json import PartialJSON

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def feed_all(doc: str, size: int) -> PartialJSON:
    p = PartialJSON()
    for i in range(0, len(doc), size):
        p.feed(doc[i:i + size])
    return p


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), size=st.integers(1, 9),
       indent=st.sampled_from([None, 1]))
def test_every_prefix_repairs_to_valid_json_and_the_whole_is_exact(
        value: object, size: int, indent: int | None) -> None:
    doc = json.dumps(value, indent=indent)
    p = PartialJSON()
    for i in range(0, len(doc), size):
        p.feed(doc[i:i + size])
        fixed = p.repaired()
        if fixed:
            json.loads(fixed)  # never raises
    assert p.text == doc
    assert p.snapshot() == value


def test_string_values_stream_live() -> None:
    p = feed_all('{"cell_id": "c1", "code": "print(\\"hi', 4)
    assert p.snapshot() == {"cell_id": "c1", "code": 'print("hi'}


def test_unfinished_key_number_and_literal_are_dropped_not_guessed() -> None:
    assert feed_all('{"a": 1, "b', 3).snapshot() == {"a": 1}
    assert feed_all('{"a": 1, "b": tr', 3).snapshot() == {"a": 1}
    assert feed_all('{"a": [1, 2, 3', 3).snapshot() == {"a": [1, 2, 3]}
    assert feed_all('{"a": -', 3).snapshot() == {}
    assert feed_all('{"a": "x\\', 3).snapshot() == {"a": "x"}
    assert feed_all('{"a": "\\u00e', 3).snapshot() == {"a": ""}


def test_escaped_quotes_and_backslashes_split_anywhere() -> None:
    doc = json.dumps({"q": 'say "hi" \\ now', "n": [True, None, 1.5e3]})
    for size in range(1, 8):
        assert feed_all(doc, size).snapshot() == json.loads(doc)
