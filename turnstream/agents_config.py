"""The agents of a server session, as JSON: the ``agents`` of ``POST /api/sessions`` and the
file named by the ``agents_file`` setting (``--agents``). docs/agents.md shows the format.

Each entry names an agent, its model (``provider:model``; the server's model when absent),
its system prompt, its toolset, the agents it may hand over to and when its hand-offs take
effect. The first entry answers first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .errors import UsageError
from .storable import Text

AgentName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,40}$", description="The agent's name.")]


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: AgentName
    model: Text | None = Field(default=None, max_length=500,
                               description="provider:model of this agent; the session's model when absent.")
    system: Text | None = Field(default=None, max_length=100_000, description="The agent's system prompt.")
    toolset: Literal["notebook", "calculator", "none"] | None = Field(
        default=None, description="The agent's server tools; the session's toolset when absent.")
    handoffs: list[AgentName] = Field(default_factory=list, max_length=16,
                                      description="Agents this one may hand the conversation over to.")
    handoff: Literal["now", "next_turn"] = Field(
        default="now", description="When this agent's hand-offs take effect: the next step, or the next turn.")
    thinking_budget: int | None = Field(default=None, ge=1024, le=128_000,
                                        description="Extended thinking tokens (Anthropic models).")
    description: Text = Field(default="", max_length=1000,
                              description="What the agent does, shown to the others in its hand-off tool.")


def team_problem(agents: list[AgentConfig]) -> tuple[list[int | str], str] | None:
    """Where (a path below ``agents``) and why a list of agents does not form a team, or None."""
    names: set[str] = set()
    for i, a in enumerate(agents):
        if a.name in names:
            return [i, "name"], f"two agents are named {a.name!r}"
        names.add(a.name)
    for i, a in enumerate(agents):
        for j, target in enumerate(a.handoffs):
            if target not in names:
                return [i, "handoffs", j], f"no agent named {target!r} in this session"
            if target == a.name:
                return [i, "handoffs", j], "an agent cannot hand over to itself"
    return None


AGENTS_ADAPTER: TypeAdapter[list[AgentConfig]] = TypeAdapter(list[AgentConfig])


def load_agents_file(path: str | Path) -> list[AgentConfig]:
    """The agents of a file (a JSON list of agents); ``UsageError`` saying what is wrong."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the agents file {path}: {exc.strerror}") from None
    try:
        agents = AGENTS_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UsageError(f"agents file {path}: {where}: {first['msg']}") from None
    if not agents:
        raise UsageError(f"agents file {path}: the list is empty")
    problem = team_problem(agents)
    if problem is not None:
        raise UsageError(f"agents file {path}: {'.'.join(map(str, problem[0]))}: {problem[1]}")
    return agents
