"""Several agents in one session: who speaks, hand-off tools, and when a hand-off applies.

An agent (``Persona``) is a name, a model, a system prompt, tools and an optional structured
``output``. A ``Team`` is the agents of one session and which may hand over to which. For
each agent that may hand over, every allowed target gets a generated tool
``transfer_to_<target>``; calling it is the hand-off.

The loop consults a ``Conductor`` at each step boundary (``speaker``): the agent of the
turn's first step is the session's current agent (stored, ``Store.set_current_agent``); a
step that ran a hand-off call with a successful result makes the target the current agent,
and with ``handoff="now"`` (the calling agent's setting) the next step already runs as the
target, with ``"next_turn"`` the caller finishes the turn and the target answers the next
message. The rules of docs/agents.md, including the history each agent sees:

* every agent sees the user's messages, every agent's text, and every tool call with its
  result (hand-off calls included), so tool pairing stays whole across a switch;
* thinking, redacted thinking and provider-native blocks go only to the model that made
  them (``transcript.py``), so a switch between providers never replays a foreign signature;
* an agent with extended thinking that takes over in the middle of a tool loop whose last
  call another model made runs without thinking until the next user message (Anthropic
  requires the last assistant message of a tool loop to begin with its own thinking).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel

from .blocks import Block, RedactedThinkingBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from .errors import UsageError
from .output import OutputVia, output_tool
from .providers.base import Message, Provider
from .store.protocol import Store
from .tools.tool import Tool

HandoffTiming: TypeAlias = Literal["now", "next_turn"]
HANDOFF_PREFIX = "transfer_to_"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
HANDED_NOW = "Handed over to {target}: {target} answers from the next step on."
HANDED_NEXT = "Handed over to {target}: {target} answers the user's next message. Finish this answer yourself."


@dataclass(slots=True)
class Persona:
    """One agent as the loop needs it."""

    name: str
    provider: Provider
    system: str | None = None
    tools: Sequence[Tool] = ()
    thinking_budget: int | None = None
    output: type[BaseModel] | None = None
    handoffs: Sequence[str] = ()
    """The agents this one may hand over to."""
    handoff: HandoffTiming = "now"
    """When this agent's hand-offs take effect: at the next step, or at the next turn."""
    description: str = ""
    """What the agent does, shown to the others in the description of its hand-off tool."""
    output_via: OutputVia = "native"
    """How ``output`` is asked for (``output.OutputVia``)."""


def handoff_tool(target: Persona, timing: HandoffTiming) -> Tool:
    """The tool an agent calls to hand the conversation over to ``target``."""
    text = (HANDED_NOW if timing == "now" else HANDED_NEXT).format(target=target.name)

    def transfer() -> str:
        return text

    about = f" ({target.description})" if target.description else ""
    return Tool(name=HANDOFF_PREFIX + target.name, fn=transfer, idempotent=True,
                description=f"Hand the conversation over to the agent '{target.name}'{about}.",
                input_schema={"type": "object", "properties": {}, "additionalProperties": False})


@dataclass(slots=True)
class Team:
    """The agents of a session; ``entry`` answers first."""

    members: dict[str, Persona]
    entry: str
    _tools: dict[str, list[Tool]] = field(default_factory=dict)

    @classmethod
    def of(cls, personas: Sequence[Persona], entry: str | None = None) -> Team:
        members: dict[str, Persona] = {}
        for p in personas:
            if not NAME_PATTERN.match(p.name):
                raise UsageError(f"agent name {p.name!r}: use 1 to 40 letters, digits, '_' or '-'")
            if p.name in members:
                raise UsageError(f"two agents are named {p.name!r}")
            members[p.name] = p
        if not members:
            raise UsageError("a team needs at least one agent")
        for p in members.values():
            for t in p.handoffs:
                if t not in members:
                    raise UsageError(f"agent {p.name!r} hands over to {t!r}, which is not in the team")
                if t == p.name:
                    raise UsageError(f"agent {p.name!r} cannot hand over to itself")
            names = {t.name for t in p.tools}
            clash = names & {HANDOFF_PREFIX + t for t in p.handoffs}
            if clash:
                raise UsageError(f"agent {p.name!r} has a tool named like a hand-off: {sorted(clash)[0]}")
        start = entry or next(iter(members))
        if start not in members:
            raise UsageError(f"the entry agent {start!r} is not in the team")
        return cls(members, start)

    def member(self, name: str | None) -> Persona:
        """The agent named ``name``; the entry agent for None or a name no longer in the team."""
        return self.members.get(name or "", self.members[self.entry])

    def tools_of(self, name: str) -> list[Tool]:
        """The agent's own tools, then its hand-off tools."""
        got = self._tools.get(name)
        if got is None:
            p = self.members[name]
            got = [*p.tools, *(handoff_tool(self.members[t], p.handoff) for t in p.handoffs)]
            if p.output is not None and p.output_via == "tool":
                got.append(output_tool(p.output))
            self._tools[name] = got
        return got

    def handoff_in(self, name: str, blocks: Sequence[Block]) -> str | None:
        """The target of the first hand-off call of ``name`` in ``blocks`` that has a
        successful result there; None when there is none."""
        allowed = set(self.members[name].handoffs)
        ok = {b.tool_use_id for b in blocks if isinstance(b, ToolResultBlock) and not b.is_error}
        for b in blocks:
            if (isinstance(b, ToolUseBlock) and b.name.startswith(HANDOFF_PREFIX) and b.tool_use_id in ok
                    and b.name[len(HANDOFF_PREFIX):] in allowed):
                return b.name[len(HANDOFF_PREFIX):]
        return None


class Conductor:
    """Who speaks in one turn; consulted by the loop at each step boundary."""

    def __init__(self, team: Team, store: Store) -> None:
        self.team = team
        self.store = store
        self.name: str | None = None
        self._stored: str | None = None

    async def speaker(self, session_id: str, blocks: Sequence[Block], step: int) -> Persona:
        """The agent that runs ``step``, after applying a hand-off made in the step before.

        The first call of a runner takes the agent of the turn's last block (a turn resumed
        or taken over goes on with the agent that was speaking), else the session's current
        agent, else the entry agent."""
        if self.name is None:
            session = await self.store.get_session(session_id)
            self._stored = session.current_agent if session is not None else None
            last = next((b.agent for b in reversed(blocks) if b.agent in self.team.members), None)
            self.name = self.team.member(last or self._stored).name
        target = self.team.handoff_in(self.name, [b for b in blocks if b.step == step - 1])
        if target is not None:
            if self.team.members[self.name].handoff == "now":
                self.name = target
            if self._stored != target:
                await self.store.set_current_agent(session_id, target)
                self._stored = target
        return self.team.members[self.name]


def thinking_allowed(messages: Sequence[Message]) -> bool:
    """Whether a request with extended thinking is valid for this transcript: the last
    assistant message, when it made tool calls, must begin with thinking of this model
    (blocks of other models are already left out of ``messages``)."""
    for m in reversed(messages):
        if m.role != "assistant":
            continue
        if not any(isinstance(b, ToolUseBlock) for b in m.blocks):
            return True
        return bool(m.blocks) and isinstance(m.blocks[0], ThinkingBlock | RedactedThinkingBlock)
    return True


def persona_config(p: Persona) -> dict[str, Any]:
    """How a persona is described in a session's stored ``agents``: the fields of the server's
    format (agents_config.py) that it has, so either side can read the other's sessions."""
    d: dict[str, Any] = {"name": p.name, "model": p.provider.origin, "system": p.system,
                         "handoffs": list(p.handoffs), "handoff": p.handoff, "thinking_budget": p.thinking_budget,
                         "description": p.description}
    return {k: v for k, v in d.items() if v not in (None, "", [])}
