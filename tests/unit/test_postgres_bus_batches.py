"""What the PostgreSQL bus sends, without a database: only the sessions another process follows,
gathered into notifications under PostgreSQL's payload limit, in publish order, each starting
with the sender's origin; an event too large alone travels as a wake-up."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstream.bus import Envelope
from turnstream.store.postgres_bus import _MAX_PAYLOAD, CHANNEL, PostgresBus, session_channel


def bus_followed_elsewhere(*sessions: str) -> PostgresBus:
    bus = PostgresBus("postgresql://unused")
    for s in sessions:
        bus._interest[s] = {"another-process": float("inf")}
    return bus


def decoded(bus: PostgresBus, channels: list[str], payloads: list[str]) -> dict[str, list[dict[str, object]]]:
    out: dict[str, list[dict[str, object]]] = {}
    for channel, payload in zip(channels, payloads, strict=True):
        assert len(payload.encode()) < 8000
        assert payload.startswith(bus.origin)
        out.setdefault(channel, []).extend(orjson.loads(payload[len(bus.origin):]))
    return out


def test_a_session_nobody_follows_elsewhere_sends_nothing() -> None:
    bus = PostgresBus("postgresql://unused")
    bus.publish_envelope(Envelope("s1", "t1", 1, "block_delta", {"index": 0, "text": "hi"}))
    assert bus._batch()[:2] == ([], [])


@settings(max_examples=50)
@given(st.lists(st.tuples(st.sampled_from(["s1", "s2"]), st.integers(0, 3000)), min_size=1, max_size=60))
def test_events_are_batched_per_session_in_order_under_the_limit(events: list[tuple[str, int]]) -> None:
    bus = bus_followed_elsewhere("s1", "s2")
    for n, (session, size) in enumerate(events, start=1):
        bus.publish_envelope(Envelope(session, f"t-{session}", n, "block_delta", {"index": 0, "text": "x" * size}))
    channels, payloads, _ = bus._batch()
    got = decoded(bus, channels, payloads)
    for session in ("s1", "s2"):
        want = [n for n, (s, _) in enumerate(events, start=1) if s == session]
        assert [d["n"] for d in got.get(session_channel(session), [])] == want
    assert bus._batch()[:2] == ([], [])  # the window's items leave once


def test_an_event_too_large_for_a_notification_becomes_a_wake_up() -> None:
    bus = bus_followed_elsewhere("s1")
    bus.publish_envelope(Envelope("s1", "t1", 7, "block_stop", {"index": 0, "text": "x" * _MAX_PAYLOAD}))
    channels, payloads, _ = bus._batch()
    assert decoded(bus, channels, payloads) == {session_channel("s1"): [{"w": "t1"}]}


def test_control_messages_go_on_the_shared_channel() -> None:
    bus = PostgresBus("postgresql://unused")
    bus._announce({"k": "c", "a": "cancel", "t": "t1"})
    channels, payloads, _ = bus._batch()
    assert channels == [CHANNEL]
    assert orjson.loads(payloads[0]) == {"k": "c", "a": "cancel", "t": "t1", "o": bus.origin}
