"""What the server holds for its lifetime: settings (``turnstream.settings``), store, bus,
live turns, notebooks.

``AppState.config_for(session)`` is the one place that decides what a turn of a session
runs with: its model (the session's, else the server's) and its server tools (the
session's toolset).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents import Persona, Team
from ..agents_config import AGENTS_ADAPTER, AgentConfig, load_agents_file
from ..blocks import Session
from ..bus import Bus
from ..errors import UsageError
from ..limits import Budgets, Limits
from ..loop import RunConfig
from ..pricing import Price
from ..providers import Provider, resolve_model
from ..settings import Settings
from ..store import Store
from ..tools.loading import load_mcp_servers
from ..tools.tool import Tool
from ..tools.toolset import Toolset
from .auth import Authenticator
from .child_stderr import logged_stderr

if TYPE_CHECKING:
    from ..notebook import NotebookManager
    from .titles import Titler
    from .turns import TurnManager

STATIC_DIR = Path(__file__).parent / "static"
DEFAULT_TOOLSET = "notebook"

NOTEBOOK_SYSTEM = (
    "You work beside the user's notebook. Use the notebook tools to read, write and run cells "
    "(Python, or SQL over the Python namespace's DataFrames) and answer from their outputs."
)


def toolset_tools(name: str | None, *, notebooks_available: bool) -> list[Tool]:
    from ..toolsets import calculator_tool

    name = name or DEFAULT_TOOLSET
    if name == "none":
        return []
    if name == "calculator" or not notebooks_available:
        return [calculator_tool]
    from ..toolsets.notebook import NOTEBOOK_TOOLS

    return [*NOTEBOOK_TOOLS, calculator_tool]


@dataclass
class AppState:
    settings: Settings
    store: Store
    bus: Bus
    notebooks: NotebookManager | None = None
    turns: TurnManager = field(init=False)
    auth: Authenticator = field(init=False)
    titles: Titler = field(init=False)
    _providers: dict[str, Provider] = field(default_factory=dict)
    extra_tools: list[Tool] = field(default_factory=list)
    """The operator's own server tools (``--tools``), in every session's toolset."""
    mcp_servers: list[Toolset] = field(default_factory=list)
    """The MCP servers of ``--mcp-config``, whose tools join every session's toolset."""
    default_agents: list[AgentConfig] | None = None
    """The agents file's agents (``--agents``): what a session created without agents gets."""
    budgets: Budgets = field(init=False)
    prices: dict[str, Price] = field(init=False)

    def __post_init__(self) -> None:
        from .admission import Admission
        from .titles import Titler
        from .turns import TurnManager

        self.budgets = self.settings.budgets()
        self.prices = self.settings.price_table()
        if self.settings.tools and not self.extra_tools:
            from ..tools.loading import load_tools

            self.extra_tools = load_tools(self.settings.tools)
        if self.settings.mcp_config is not None and not self.mcp_servers:
            self.mcp_servers = load_mcp_servers(self.settings.mcp_config, stderr=logged_stderr,
                                                sampling=self.settings.mcp_sampling)
        if self.settings.agents is not None and self.default_agents is None:
            self.default_agents = load_agents_file(self.settings.agents)
            for a in self.default_agents:
                problem = self.check_model(a.model) if a.model else None
                if problem is not None:
                    raise UsageError(f"agents file {self.settings.agents}: agent {a.name!r}: {problem}")
        admission = Admission(max_lag=self.settings.admit_max_lag, max_wait=self.settings.admit_wait)
        self.turns = TurnManager(self.store, self.bus, self.config_for, admission=admission,
                                 takeover=self.settings.takeover, sweep_interval=self.settings.sweep_interval,
                                 stale_after=self.settings.stale_after)
        self.auth = Authenticator(self.store)
        titler = self.provider(self.settings.title_model) if self.settings.title_model else None
        self.titles = Titler(self.store, self.bus, titler)
        self._route_notebook_controls()

    def _route_notebook_controls(self) -> None:
        """Another process asks this one to interrupt a cell it runs (``bus.control``)."""
        notebooks, turns = self.notebooks, self.bus.on_control
        if notebooks is None:
            return

        async def control(action: str, key: str) -> None:
            if action == "interrupt_cell":
                session_id, _, cell_id = key.partition("/")
                await notebooks.interrupt(session_id, cell_id)
            elif turns is not None:
                await turns(action, key)

        self.bus.on_control = control

    def provider(self, model: str | None) -> Provider:
        """The provider for ``model`` (the server's default when empty), made once per name.
        Raises ``UsageError`` for a name that does not resolve."""
        name = model or self.settings.model
        p = self._providers.get(name)
        if p is None:
            p = resolve_model(name)
            self._providers[name] = p
        return p

    def check_model(self, model: str) -> str | None:
        """None when a client may use ``model``, else why not."""
        prefix, _, scenario = model.partition(":")
        if prefix == "scripted" and model != self.settings.model and ("/" in scenario or scenario.endswith(".json")):
            allowed = self.settings.scenario_dir
            if allowed is None or not Path(scenario).resolve().is_relative_to(allowed):
                return ("scenario files are not allowed on this server (only built-in scenarios, or files under "
                        "TURNSTREAM_SCENARIO_DIR)")
        try:
            self.provider(model)
        except UsageError as exc:
            return str(exc)
        except Exception as exc:  # a provider that cannot start (missing key, bad scenario file)
            return f"{type(exc).__name__}: {exc}"
        return None

    def session_agents(self, agents: list[AgentConfig] | None) -> tuple[list[dict[str, Any]] | None, str | None]:
        """What a new session stores as its agents and current agent: ``agents`` when the
        client gave some, else the agents file's, else none (a session of one model)."""
        chosen = agents if agents is not None else self.default_agents
        if chosen is None:
            return None, None
        return [a.model_dump(exclude_defaults=True) for a in chosen], chosen[0].name

    def config_for(self, session: Session) -> RunConfig:
        tools: list[Tool | Toolset] = [*toolset_tools(session.toolset, notebooks_available=self.notebooks is not None),
                                       *self.extra_tools, *self.mcp_servers]
        deps: dict[str, Any] = {}
        system = None
        if self.notebooks is not None and any(isinstance(t, Tool) and t.name == "run_cell" for t in tools):
            deps["notebooks"] = self.notebooks
            system = NOTEBOOK_SYSTEM
        team = self._team(session, deps) if session.agents else None
        provider = team.members[team.entry].provider if team is not None else self.provider(session.model or None)
        return RunConfig(provider=provider, tools=tools, system=system, deps=deps, live_deltas=True,
                         limits=self.limits(), take_queued=self.settings.queued_messages == "next_step", team=team,
                         prices=self.prices)

    def _team(self, session: Session, deps: dict[str, Any]) -> Team:
        """The agents of a session of several agents, each with its model, prompt and tools
        (the MCP servers' tools join every agent's in the loop)."""
        members: list[Persona] = []
        for a in AGENTS_ADAPTER.validate_python(session.agents):
            tools = [*toolset_tools(a.toolset or session.toolset, notebooks_available=self.notebooks is not None),
                     *self.extra_tools]
            system = a.system
            if self.notebooks is not None and any(t.name == "run_cell" for t in tools):
                deps["notebooks"] = self.notebooks
                system = system or NOTEBOOK_SYSTEM
            members.append(Persona(a.name, self.provider(a.model or session.model or None), system, tools,
                                   a.thinking_budget, None, a.handoffs, a.handoff, a.description))
        return Team.of(members)

    def limits(self) -> Limits:
        """A turn's limits: this server's limits on images and files, and its budgets."""
        return Limits(max_attachment_bytes=int(self.settings.attachment_mb * 1024 * 1024),
                      max_attachments=self.settings.max_attachments, budgets=self.budgets,
                      context_tokens=self.settings.context_tokens, context_fraction=self.settings.context_fraction)

    async def aclose(self) -> None:
        await self.turns.aclose()
        await self.titles.aclose()
        if self.notebooks is not None:
            await self.notebooks.aclose()
        for p in self._providers.values():
            await p.aclose()
        for server in self.mcp_servers:
            await server.aclose()
        self._providers.clear()
