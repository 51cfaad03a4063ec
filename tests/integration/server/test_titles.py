"""Chat titles (issue 16, point 3): an untitled chat takes its first message as its title when
that message starts a turn, and a title model, when one is configured, then writes a better one;
every new title reaches the session's tabs on the bus. The app runs in-process over ASGI; the
title model is ``turnstream mock-provider``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest

from tests.support.mock_provider import MockHandle
from turnstream.bus import Bus, SessionMessage, Subscription
from turnstream.server import titles
from turnstream.server.app import create_app
from turnstream.server.state import AppState, Settings
from turnstream.store import MemoryStore

LONG = "Plot the monthly revenue of 2024 by region, please, with a trend line for each one of them"


def test_a_title_from_a_message_is_one_line_cut_at_a_word() -> None:
    assert titles.from_message("  Weather\n in   Paris? ") == "Weather in Paris?"
    assert titles.from_message(LONG) == "Plot the monthly revenue of 2024 by region, please, with a…"
    assert len(titles.from_message("x" * 200)) == 61
    assert titles.clean('Title: "Regional revenue trends."\nmore') == "Regional revenue trends"
    assert titles.clean("  \n") is None


async def next_title(sub: Subscription, deadline: float = 10.0) -> str:
    end = time.monotonic() + deadline
    while (left := end - time.monotonic()) > 0:
        item = await sub.get(timeout=left)
        if isinstance(item, SessionMessage) and item.data.get("type") == "session":
            return str(item.data["title"])
    raise AssertionError("no title reached the bus")


async def app_with(settings: Settings) -> tuple[AppState, MemoryStore, dict[str, str]]:
    store = MemoryStore()
    await store.open()
    state = AppState(settings=settings, store=store, bus=Bus())
    _, key = await store.create_user("ann")
    return state, store, {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def client_for() -> AsyncIterator[Any]:
    opened: list[tuple[AppState, MemoryStore]] = []

    async def make(settings: Settings) -> tuple[httpx.AsyncClient, AppState]:
        state, store, auth = await app_with(settings)
        opened.append((state, store))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(state)), base_url="http://test",
                                   headers=auth)
        return client, state

    yield make
    for state, store in opened:
        await state.aclose()
        await store.aclose()


async def test_an_untitled_chat_is_named_after_its_first_message(client_for: Any) -> None:
    client, state = await client_for(Settings(db="memory://", model="scripted:echo"))
    async with client:
        sid = (await client.post("/api/sessions", json={})).json()["id"]
        sub = state.bus.subscribe_session(sid)
        r = await client.post(f"/api/sessions/{sid}/turns", json={"message": LONG})
        assert r.status_code == 200 and "turn_complete" in r.text
        assert await next_title(sub) == titles.from_message(LONG)
        r = await client.post(f"/api/sessions/{sid}/turns", json={"message": "and now?"})
        assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == titles.from_message(LONG)
        named = (await client.post("/api/sessions", json={"title": "Mine"})).json()["id"]
        await client.post(f"/api/sessions/{named}/turns", json={"message": "hello"})
        assert (await client.get(f"/api/sessions/{named}")).json()["title"] == "Mine"
        sub.close()


async def test_a_title_model_writes_a_short_title(client_for: Any, mock_provider: MockHandle,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", mock_provider.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    titler = mock_provider.scenario("titles-model", {"steps": [{"blocks": [
        {"type": "text", "text": "\"Regional revenue trends.\""}]}]})
    client, state = await client_for(Settings(db="memory://", model="scripted:echo",
                                              title_model=f"anthropic:{titler}"))
    async with client:
        sid = (await client.post("/api/sessions", json={})).json()["id"]
        sub = state.bus.subscribe_session(sid)
        await client.post(f"/api/sessions/{sid}/turns", json={"message": LONG})
        assert await next_title(sub) == titles.from_message(LONG)  # at once
        assert await next_title(sub) == "Regional revenue trends"  # then the model's
        assert (await client.get(f"/api/sessions/{sid}")).json()["title"] == "Regional revenue trends"
        sub.close()
    [request] = mock_provider.requests(titler)
    assert request["system"][0]["text"] == titles.TITLE_PROMPT and LONG in str(request["messages"])
    assert request.get("tools") in (None, [])
