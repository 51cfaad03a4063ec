"""``Agent``: the library's front door (SPEC §0).

    agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], system="…", max_steps=10)
    turn = await agent.run("Weather in Paris?")
    async for event in agent.stream("Weather in Paris?"):
        ...

Without ``session_id`` every call starts a new conversation; with one (and a ``store``)
the conversation continues across calls and processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from .blocks import Turn
from .events import StreamEvent, TurnComplete
from .lifecycle import submit_tool_result
from .limits import Limits
from .loop import RunConfig, TurnRunner
from .providers import Provider, resolve_model
from .store import MemoryStore, Store
from .tools.executor import Approver
from .tools.tool import Tool, make_tool

LOCAL_USER = "local"


def open_store_url(url: str) -> Store:
    from . import store as store_pkg

    opener = getattr(store_pkg, "open_store", None)
    if opener is None:  # pragma: no cover - only while the durable stores are not installed
        raise NotImplementedError("durable stores are not available in this build")
    result: Store = opener(url)
    return result


class Agent:
    def __init__(
        self,
        model: str | Provider,
        *,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system: str | None = None,
        max_steps: int = 10,
        store: str | Store | None = None,
        session_id: str | None = None,
        limits: Limits | None = None,
        approve: Approver | None = None,
        deps: dict[str, Any] | None = None,
        thinking_budget: int | None = None,
    ) -> None:
        self.provider = resolve_model(model) if isinstance(model, str) else model
        self.tools = [t if isinstance(t, Tool) else make_tool(t) for t in tools]
        self.limits = limits or Limits()
        self.limits.max_steps = max_steps if limits is None else self.limits.max_steps
        self.system = system
        self.store: Store = open_store_url(store) if isinstance(store, str) else (store or MemoryStore())
        self.session_id = session_id
        self.approve = approve
        self.deps = deps or {}
        self.thinking_budget = thinking_budget
        self._opened = False
        self._live: set[TurnRunner] = set()

    def _config(self, live: bool) -> RunConfig:
        return RunConfig(provider=self.provider, tools=self.tools, system=self.system, limits=self.limits,
                         approver=self.approve, deps=self.deps, live_deltas=live,
                         thinking_budget=self.thinking_budget)

    async def _session(self, session_id: str | None) -> tuple[str, list[Turn] | None]:
        """The session's id, and its earlier turns when known without asking the store
        (none, for a session created here); None when the runner should read them."""
        if not self._opened:
            await self.store.open()
            self._opened = True
        sid = session_id or self.session_id
        if sid is not None and await self.store.get_session(sid) is not None:
            return sid, None
        s = await self.store.create_session(LOCAL_USER, model=self.provider.origin, session_id=sid)
        return s.id, []

    async def run(self, message: str, *, session_id: str | None = None,
                  client_tools: list[dict[str, Any]] | None = None) -> Turn:
        """Run one turn to the end (or until it waits for the client) and return it."""
        sid, history = await self._session(session_id)
        runner = TurnRunner(self._config(live=False), self.store)
        return await runner.run(sid, message, client_tools=client_tools, history=history)

    async def stream(self, message: str, *, session_id: str | None = None,
                     client_tools: list[dict[str, Any]] | None = None) -> AsyncGenerator[StreamEvent, None]:
        """Run one turn, yielding its events (SPEC §8) as they happen.

        Closing the generator early cancels the turn: wrap it in ``contextlib.aclosing`` (or
        call ``cancel(turn_id)``) for that to happen at once rather than when it is collected."""
        sid, history = await self._session(session_id)
        async with aclosing(self._pump(lambda r: r.run(sid, message, client_tools=client_tools,
                                                       history=history))) as events:
            async for ev in events:
                yield ev

    async def submit(self, turn_id: str, tool_use_id: str, *, content: str | None = None, is_error: bool = False,
                     approved: bool | None = None) -> bool:
        """Answer a ``tool_request``; True when the turn can be resumed."""
        return await submit_tool_result(self.store, turn_id, tool_use_id, content=content, is_error=is_error,
                                        approved=approved)

    async def resume(self, turn_id: str) -> Turn:
        runner = TurnRunner(self._config(live=False), self.store)
        return await runner.resume(turn_id)

    async def resume_stream(self, turn_id: str) -> AsyncGenerator[StreamEvent, None]:
        async with aclosing(self._pump(lambda r: r.resume(turn_id))) as events:
            async for ev in events:
                yield ev

    async def _pump(self, start: Callable[[TurnRunner], Any]) -> AsyncGenerator[StreamEvent, None]:
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        runner = TurnRunner(self._config(live=True), self.store, on_event=queue.put_nowait)

        async def drive() -> None:
            try:
                await start(runner)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(drive())
        self._live.add(runner)
        finished = False
        try:
            while True:
                ev = await queue.get()
                if ev is None:
                    finished = True
                    break
                yield ev
                if type(ev) is TurnComplete:
                    finished = True
                    break
            await task
        finally:
            self._live.discard(runner)
            if not finished:
                runner.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def cancel(self, turn_id: str) -> bool:
        """Cancel a turn this agent is streaming; False if it is not running here."""
        for runner in self._live:
            if runner.turn_id == turn_id:
                runner.cancel()
                return True
        return False

    async def aclose(self) -> None:
        await self.provider.aclose()
        await self.store.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
