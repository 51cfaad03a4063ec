"""Chat titles. A session created without a title is named after its first message as soon as
that message starts a turn, so no chat stays "New chat". When ``TURNSTREAM_TITLE_MODEL`` names a
model, that model then writes a short title in the background, which replaces it. Each new title
is stored and sent to the session's open tabs: ``{"type": "session", "session_id", "title"}`` on
the WebSocket."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..bus import Bus
from ..errors import TurnstreamError
from ..providers import Provider
from ..providers.base import Delta, Message, ModelRequest
from ..store import Store

log = logging.getLogger("turnstream.server.titles")

MAX_CHARS = 60
TITLE_PROMPT = ("Write a title of at most six words for the conversation that the user's message below "
                "begins. Answer with the title alone: no quotes, no full stop, no explanation.")


def from_message(message: str, limit: int = MAX_CHARS) -> str:
    """The message's words on one line, cut at a word before ``limit`` characters (with "…")."""
    text = " ".join(message.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rsplit(" ", 1)[0] if " " in head[limit // 2:] else head
    return cut.rstrip(" ,.;:-") + "…"


def clean(answer: str) -> str | None:
    """A model's answer as a title: its first line, unquoted, without a final full stop; None
    when nothing usable is left."""
    line = next((ln.strip() for ln in answer.splitlines() if ln.strip()), "")
    line = line.removeprefix("Title:").strip().strip("\"'“”‘’*#`").rstrip(".").strip()
    return from_message(line) if line else None


async def ask_model(provider: Provider, message: str) -> str | None:
    """The title ``provider`` writes for a conversation that begins with ``message``."""
    request = ModelRequest(model=provider.model, messages=[Message("user", [message[:4000]])],
                           system=TITLE_PROMPT, max_tokens=40)
    text: list[str] = []
    async with contextlib.aclosing(provider.stream(request)) as events:
        async for ev in events:
            if isinstance(ev, Delta) and ev.kind == "text":
                text.append(str(ev.value))
    return clean("".join(text))


class Titler:
    """Titles untitled sessions from their first message, and asks ``provider`` (when there is
    one) for a better title in a task of its own."""

    def __init__(self, store: Store, bus: Bus, provider: Provider | None = None) -> None:
        self.store = store
        self.bus = bus
        self.provider = provider
        self._tasks: set[asyncio.Task[None]] = set()

    async def first_message(self, session_id: str, message: str) -> None:
        title = from_message(message)
        if not title or not await self.store.rename_session(session_id, title):
            return
        self._announce(session_id, title)
        if self.provider is not None:
            task = asyncio.create_task(self._from_model(self.provider, session_id, message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _from_model(self, provider: Provider, session_id: str, message: str) -> None:
        try:
            title = await ask_model(provider, message)
        except TurnstreamError as exc:  # the first message's title stays
            log.warning("no title from %s for session %s: %s", provider.origin, session_id, exc)
            return
        if title and await self.store.rename_session(session_id, title):
            self._announce(session_id, title)

    def _announce(self, session_id: str, title: str) -> None:
        self.bus.publish_message(session_id, {"type": "session", "session_id": session_id, "title": title})

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = ["TITLE_PROMPT", "Titler", "ask_model", "clean", "from_message"]
