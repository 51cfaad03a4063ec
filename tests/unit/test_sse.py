"""The SSE decoder gives the same events however the body is split."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.paths import STREAMS
from turnstream.sse_decoder import SSEDecoder

FIXTURES = STREAMS


def decode(body: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    d = SSEDecoder()
    out = []
    prev = 0
    for c in [*sorted(set(cuts)), len(body)]:
        out += [(e.event, e.data) for e in d.feed(body[prev:c])]
        prev = c
    d.flush()
    return out


BODY = ("event: a\ndata: {\"x\": \"é€😀\"}\n\n: comment\n\nevent: b\r\ndata: one\r\ndata: two\r\n\r\n"
        "data: no event name\n\n").encode()


def test_fields_comments_and_multiline_data() -> None:
    assert decode(BODY, []) == [("a", '{"x": "é€😀"}'), ("b", "one\ntwo"), ("message", "no event name")]


@settings(max_examples=300)
@given(st.lists(st.integers(0, len(BODY)), max_size=12))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    assert decode(BODY, cuts) == decode(BODY, [])


def test_every_split_between_cr_and_lf_and_inside_utf8() -> None:
    whole = decode(BODY, [])
    for i in range(len(BODY) + 1):
        assert decode(BODY, [i]) == whole


def test_unterminated_last_event_is_dropped_and_reported() -> None:
    d = SSEDecoder()
    assert [e.data for e in d.feed(b"data: 1\n\ndata: 2")] == ["1"]
    d.flush()
    assert d.dropped_tail


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.sse")), ids=lambda p: p.stem)
def test_recorded_streams_decode_identically_in_pieces(path: Path) -> None:
    body = path.read_bytes()
    whole = decode(body, [])
    step = max(1, len(body) // 97)
    assert decode(body, list(range(0, len(body), step))) == whole
    assert decode(body, list(range(0, len(body), 7))) == whole


def datas(body: bytes, cuts: list[int]) -> list[str]:
    d = SSEDecoder()
    out: list[str] = []
    prev = 0
    for c in [*sorted(set(cuts)), len(body)]:
        out += d.feed_data(body[prev:c])
        prev = c
    return out


@settings(max_examples=300)
@given(st.lists(st.integers(0, len(BODY)), max_size=12))
def test_feed_data_is_the_data_of_feed_however_split(cuts: list[int]) -> None:
    assert datas(BODY, cuts) == [data for _, data in decode(BODY, [])]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.sse")), ids=lambda p: p.stem)
def test_feed_data_of_recorded_streams(path: Path) -> None:
    body = path.read_bytes()
    step = max(1, len(body) // 53)
    assert datas(body, list(range(0, len(body), step))) == [data for _, data in decode(body, [])]
