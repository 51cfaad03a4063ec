"""The tools a turn's model may call, kept current step after step.

``Toolbox.tools`` is one dict, shared by reference with the tool round and its executor:
the turn's own tools, the answer tool (``output_via="tool"``), the tools its toolsets (MCP
servers) list before each step, the client's tools, and for a team the tools of the agent
that speaks (a team's ``Conductor`` picks it at each step boundary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..agents import Conductor, Persona, Team
from ..lifecycle import TurnRecorder
from ..output import OUTPUT_TOOL
from ..store.protocol import Store
from ..tools.tool import Tool
from ..tools.toolset import Toolset


class Toolbox:
    def __init__(self, plain: Sequence[Tool], toolsets: Sequence[Toolset], store: Store, *,
                 team: Team | None = None, answer_tool: Tool | None = None) -> None:
        """``answer_tool``: the tool an ``output`` is answered through (``output.output_tool``)."""
        self.tools: dict[str, Tool] = {t.name: t for t in plain}
        self._toolsets = toolsets
        self._from_toolsets: dict[str, Tool] = {}
        self._client_tools: dict[str, Tool] = {}
        self._team = team
        self._conductor = Conductor(team, store) if team is not None else None
        if team is not None:  # every member's tools, for calls answered before a step picks the speaker
            for name in team.members:
                self.tools.update({t.name: t for t in team.tools_of(name) if t.name not in self.tools})
        if answer_tool is not None:
            self.tools[OUTPUT_TOOL] = answer_tool

    async def list_toolsets(self) -> None:
        """The toolsets' tools as they are now (each answers from its cache unless its tools changed)."""
        if not self._toolsets:
            return
        for name in self._from_toolsets:
            self.tools.pop(name, None)
        self._from_toolsets = {}
        for toolset in self._toolsets:
            for t in await toolset.list_tools():
                self.tools.setdefault(t.name, t)
                self._from_toolsets.setdefault(t.name, t)

    def add_client_tools(self, specs: list[dict[str, Any]]) -> None:
        """The tools the client declared for the turn (it runs them and posts their results)."""
        for spec in specs:
            t = Tool.client(spec["name"], spec.get("description", ""), spec.get("input_schema"),
                            requires_approval=bool(spec.get("requires_approval", False)))
            self.tools[t.name] = t
            self._client_tools[t.name] = t

    async def speaker(self, rec: TurnRecorder, step: int) -> Persona | None:
        """The agent a team's conductor picks for step ``step``, its tools made the ones in
        force; None without a team (the turn's one agent speaks)."""
        if self._conductor is None or self._team is None:
            return None
        p = await self._conductor.speaker(rec.session_id, rec.blocks, step)
        rec.agent = p.name
        self.tools.clear()
        self.tools.update({t.name: t for t in self._team.tools_of(p.name)})
        for t in self._from_toolsets.values():  # MCP servers' tools are every agent's
            self.tools.setdefault(t.name, t)
        self.tools.update(self._client_tools)
        return p


__all__ = ["Toolbox"]
