"""The terminal chat against a server at capacity (issue 24): a turn's POST answered 503 with
``Retry-After`` is sent again after that many seconds, saying so on the screen, and the turn
then streams; past ``BUSY_RETRIES`` refusals the error reaches the user."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx2 as httpx
import pytest
from rich.console import Console

from turnstream.chat import remote
from turnstream.chat.remote import RemoteChat
from turnstream.client import RemoteAPI
from turnstream.errors import ServerError

SSE = (b"id: t1:1\nevent: turn_start\ndata: {\"turn_id\": \"t1\", \"session_id\": \"s1\"}\n\n")


def transport(refusals: int, seen: list[str]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if len(seen) <= refusals:
            return httpx.Response(503, headers={"Retry-After": "1"},
                                  json={"error": "overloaded", "message": "the server is at capacity"})
        return httpx.Response(200, headers={"content-type": "text/event-stream", "x-turn-id": "t1"},
                              stream=httpx.ByteStream(SSE))

    return httpx.MockTransport(answer)


def chat_on(api: RemoteAPI) -> tuple[RemoteChat, Console]:
    console = Console(record=True, width=100)
    ui: Any = SimpleNamespace(console=console, approve=None)
    return RemoteChat(api, ui, "s1", []), console


async def test_a_503_is_retried_after_retry_after_and_said() -> None:
    seen: list[str] = []
    api = RemoteAPI("http://server", "k", transport=transport(2, seen))
    chat, console = chat_on(api)
    try:
        events = [ev async for ev in chat._post_turn("hello")]
    finally:
        await api.aclose()
    assert [ev.event for ev in events] == ["turn_start"]
    assert seen == ["/api/sessions/s1/turns"] * 3
    assert console.export_text().count("The server is busy; retrying in 1 s.") == 2
    assert chat.turn_id == "t1"


async def test_past_the_retries_the_refusal_reaches_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "BUSY_RETRIES", 1)
    seen: list[str] = []
    api = RemoteAPI("http://server", "k", transport=transport(10, seen))
    chat, _ = chat_on(api)
    try:
        with pytest.raises(ServerError) as err:
            _ = [ev async for ev in chat._post_turn("hello")]
    finally:
        await api.aclose()
    assert err.value.status == 503 and err.value.retry_after == 1 and len(seen) == 2
