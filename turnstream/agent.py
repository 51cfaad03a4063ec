"""``Agent``: the library's front door (SPEC §0).

    agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], system="…", max_steps=10)
    turn = await agent.run("Weather in Paris?")
    async for event in agent.stream("Weather in Paris?"):
        ...

Without ``session_id`` every call starts a new conversation; with one (and a ``store``)
the conversation continues across calls and processes.

Turns form a tree (docs/branches.md): ``parent_turn_id=`` starts a turn after any earlier turn
of the session (an edited message), ``regenerate(turn_id)`` answers a turn's message again, and
``branches(turn_id)`` lists the versions.

Several agents (docs/agents.md): give agents a ``name`` and ``handoffs``; the agent you run
is the entry of the team of every agent reachable through hand-offs. ``output=SomeModel``
asks for a structured answer (docs/structured-output.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from . import branches
from .agents import HandoffTiming, Persona, Team, persona_config
from .blocks import Attachment, Turn, UserBlock
from .content import Content, check_parts, split, store_parts
from .errors import NotFound, UsageError
from .events import StreamEvent, TurnComplete
from .lifecycle import submit_tool_result
from .limits import Limits
from .loop import RunConfig, TurnRunner
from .output import OutputVia, parse
from .pricing import PRICES, Price
from .providers import Provider, resolve_model
from .store import MemoryStore, Store
from .telemetry import telemetry_from_env
from .tools.executor import Approver
from .tools.tool import Tool, make_tool
from .tools.toolset import Toolset, split_tools

if TYPE_CHECKING:
    from .telemetry.otel import Telemetry

LOCAL_USER = "local"
M = TypeVar("M", bound=BaseModel)


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
        tools: Sequence[Tool | Toolset | Callable[..., Any]] = (),
        system: str | None = None,
        max_steps: int = 10,
        store: str | Store | None = None,
        session_id: str | None = None,
        limits: Limits | None = None,
        approve: Approver | None = None,
        deps: dict[str, Any] | None = None,
        thinking_budget: int | None = None,
        name: str = "assistant",
        description: str = "",
        handoffs: Sequence[Agent | str] = (),
        handoff: HandoffTiming = "now",
        output: type[BaseModel] | None = None,
        output_via: OutputVia = "native",
        telemetry: Telemetry | None = None,
        prices: Mapping[str, Price] | None = None,
        prompt_cache_key: str | None = None,
    ) -> None:
        self.provider = resolve_model(model) if isinstance(model, str) else model
        self.tools: list[Tool | Toolset] = [t if isinstance(t, Tool | Toolset) else make_tool(t) for t in tools]
        self.limits = limits or Limits()
        self.limits.max_steps = max_steps if limits is None else self.limits.max_steps
        self.system = system
        self.store: Store = open_store_url(store) if isinstance(store, str) else (store or MemoryStore())
        self.session_id = session_id
        self.approve = approve
        self.deps = deps or {}
        self.thinking_budget = thinking_budget
        self.name = name
        self.description = description
        self.handoffs: list[Agent | str] = list(handoffs)
        """Agents this one may hand the conversation over to (objects, or names of agents of the team)."""
        self.handoff: HandoffTiming = handoff
        self.output = output
        self.output_via: OutputVia = output_via
        """``native`` (the API's structured-output option) or ``tool`` (an answer tool)."""
        self.telemetry = telemetry if telemetry is not None else telemetry_from_env()
        """OpenTelemetry spans and metrics: the ``OTEL_*`` variables' by default (None when they
        ask for none), or a ``turnstream.telemetry.otel.Telemetry`` of your own."""
        self.prices = prices if prices is not None else PRICES
        self.prompt_cache_key = prompt_cache_key
        self._opened = False
        self._live: set[TurnRunner] = set()
        self._team: Team | None = None

    def persona(self) -> Persona:
        """This agent as a member of a team."""
        plain = [t for t in self.tools if isinstance(t, Tool)]  # toolsets: the entry agent's serve every agent
        return Persona(self.name, self.provider, self.system, plain, self.thinking_budget, self.output,
                       [h if isinstance(h, str) else h.name for h in self.handoffs], self.handoff, self.description,
                       self.output_via)

    def team(self) -> Team | None:
        """Every agent reachable from this one through hand-offs, this one first; None when
        it hands over to nobody."""
        if not self.handoffs:
            return None
        found: dict[str, Agent] = {}
        todo: list[Agent] = [self]
        while todo:
            a = todo.pop()
            if a.name in found:
                if found[a.name] is not a:
                    raise UsageError(f"two different agents are named {a.name!r}")
                continue
            found[a.name] = a
            todo.extend(h for h in a.handoffs if isinstance(h, Agent))
        return Team.of([a.persona() for a in found.values()], entry=self.name)

    def output_of(self, turn: Turn, output: type[M]) -> M:
        """The turn's final answer as ``output`` (``pydantic.ValidationError`` if it is not one)."""
        got = parse(output, turn.blocks, turn.text)
        assert isinstance(got, output)
        return got

    def _config(self, live: bool) -> RunConfig:
        if self._team is None:
            self._team = self.team()
        return RunConfig(provider=self.provider, tools=self.tools, system=self.system, limits=self.limits,
                         approver=self.approve, deps=self.deps, live_deltas=live,
                         thinking_budget=self.thinking_budget, output=self.output, output_via=self.output_via,
                         team=self._team,
                         telemetry=self.telemetry, prices=self.prices, prompt_cache_key=self.prompt_cache_key)

    async def _session(self, session_id: str | None) -> tuple[str, list[Turn] | None]:
        """The session's id, and its earlier turns when known without asking the store
        (none, for a session created here); None when the runner should read them."""
        await self._open()
        if self._team is None:
            self._team = self.team()
        sid = session_id or self.session_id
        if sid is not None and await self.store.get_session(sid) is not None:
            return sid, None
        team = self._team
        agents = [persona_config(p) for p in team.members.values()] if team is not None else None
        s = await self.store.create_session(LOCAL_USER, model=self.provider.origin, session_id=sid, agents=agents,
                                            current_agent=team.entry if team is not None else None)
        return s.id, []

    async def _open(self) -> None:
        if not self._opened:
            await self.store.open()
            self._opened = True

    async def _input(self, message: Content) -> tuple[str, list[Attachment]]:
        """The text of a message and its images and files, checked and stored
        (``ContentRejected`` for one that cannot be taken)."""
        text, parts = split(message)
        check_parts(parts, max_bytes=self.limits.max_attachment_bytes, max_count=self.limits.max_attachments)
        return text, await store_parts(self.store, parts)

    async def run(self, message: Content, *, session_id: str | None = None,
                  client_tools: list[dict[str, Any]] | None = None, parent_turn_id: str | None = None) -> Turn:
        """Run one turn to the end (or until it waits for the client) and return it.
        ``message``: text, or a list of text, ``ImagePart`` and ``FilePart`` (content.py).
        ``parent_turn_id``: the earlier turn of the session it follows (``branches.ROOT`` for
        none); left out, the session's current leaf (docs/branches.md)."""
        sid, history = await self._session(session_id)
        text, refs = await self._input(message)
        runner = TurnRunner(self._config(live=False), self.store)
        return await runner.run(sid, text, client_tools=client_tools, history=history, attachments=refs,
                                parent_turn_id=parent_turn_id)

    async def stream(self, message: Content, *, session_id: str | None = None,
                     client_tools: list[dict[str, Any]] | None = None,
                     parent_turn_id: str | None = None) -> AsyncGenerator[StreamEvent, None]:
        """Run one turn, yielding its events (SPEC §8) as they happen (``parent_turn_id`` as
        for ``run``).

        Closing the generator early cancels the turn: wrap it in ``contextlib.aclosing`` (or
        call ``cancel(turn_id)``) for that to happen at once rather than when it is collected."""
        sid, history = await self._session(session_id)
        text, refs = await self._input(message)
        async with aclosing(self._pump(lambda r: r.run(sid, text, client_tools=client_tools, history=history,
                                                       attachments=refs, parent_turn_id=parent_turn_id))) as events:
            async for ev in events:
                yield ev

    async def regenerate(self, turn_id: str) -> Turn:
        """Answer turn ``turn_id``'s message again: a new turn with the same input (text,
        images and files, client tools) as a sibling of that turn (it follows the same turn),
        which becomes the session's current leaf. ``NotFound`` for no such turn."""
        old = await self._stored_turn(turn_id)
        refs = [a for b in old.blocks if isinstance(b, UserBlock) and b.step == 0 for a in b.attachments]
        tools = await self.store.client_tools(old.id)
        runner = TurnRunner(self._config(live=False), self.store)
        return await runner.run(old.session_id, old.input, client_tools=tools or None, attachments=refs,
                                parent_turn_id=old.parent_turn_id or branches.ROOT)

    async def branches(self, turn_id: str) -> list[Turn]:
        """The versions of turn ``turn_id``: the turns that follow the same turn as it, in
        creation order, itself included. ``NotFound`` for no such turn."""
        old = await self._stored_turn(turn_id)
        return branches.siblings(await self.store.list_turns(old.session_id), old.id)

    async def _stored_turn(self, turn_id: str) -> Turn:
        await self._open()
        found = await self.store.get_turn(turn_id)
        if found is None:
            raise NotFound("turn", f"turn {turn_id} not found")
        return found

    async def submit(self, turn_id: str, tool_use_id: str, *, content: str | None = None, is_error: bool = False,
                     approved: bool | None = None, reason: str | None = None, always: bool = False,
                     decided_by: str = "user") -> bool:
        """Answer a ``tool_request``; True when the turn can be resumed. A decision is kept in
        the audit trail under ``decided_by``; ``always`` allows the tool for the rest of the session."""
        return await submit_tool_result(self.store, turn_id, tool_use_id, content=content, is_error=is_error,
                                        approved=approved, reason=reason, always=always, decided_by=decided_by)

    async def send(self, session_id: str, message: Content) -> bool:
        """A message for the session's running turn: the model reads it at the turn's next
        step. False (nothing queued) when no turn of the session runs."""
        await self._open()
        text, refs = await self._input(message)
        return await self.store.queue_message(session_id, text, refs) is not None

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
        """Close the provider, the store and the toolsets (MCP servers) given in ``tools``."""
        for toolset in split_tools(self.tools)[1]:
            await toolset.aclose()
        await self.provider.aclose()
        await self.store.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
