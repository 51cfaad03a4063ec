"""What a turn is run with: ``RunConfig`` (imported, as ever, from ``turnstream.loop`` too).

The conductor (``loop.TurnRunner``) hands each phase the part it needs: ``StepSettings``,
``RoundSettings``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..agents import Team
from ..limits import Limits
from ..output import OutputVia
from ..pricing import PRICES, Price
from ..providers.base import Provider
from ..telemetry import telemetry_from_env
from ..tools.executor import Approver
from ..tools.tool import Tool
from ..tools.toolset import Toolset

if TYPE_CHECKING:
    from ..telemetry.otel import Telemetry


@dataclass(slots=True)
class RunConfig:
    """What a turn needs besides the store: the model, the tools and the limits."""

    provider: Provider
    tools: Sequence[Tool | Toolset] = ()
    """Tools, and toolsets (MCP servers) whose tools are listed again before each step."""
    system: str | None = None
    limits: Limits = field(default_factory=Limits)
    approver: Approver | None = None
    deps: dict[str, Any] = field(default_factory=dict)
    live_deltas: bool = True
    """Emit ``block_delta`` events (with best-effort input parses). Off when nobody listens."""
    thinking_budget: int | None = None
    """Ask the model to think first, with this many tokens (Anthropic extended thinking)."""
    take_queued: bool = True
    """Give the model, before each step after the first, the messages queued for the session
    while the turn ran (``Store.queue_message``); off, they wait for the turn to end."""
    output: type[BaseModel] | None = None
    """Validate the final answer as this model (docs/structured-output.md)."""
    output_via: OutputVia = "native"
    """Ask for it through the API's own option, or through an answer tool (``output.OutputVia``)."""
    team: Team | None = None
    """Several agents (docs/agents.md): who speaks is decided at each step boundary, and the
    provider, system prompt, tools, thinking and output above are those of the speaker."""
    telemetry: Telemetry | None = field(default_factory=telemetry_from_env)
    """OpenTelemetry spans and metrics (``telemetry/``); None, the default unless the ``OTEL_*``
    variables ask for it, costs nothing."""
    prices: Mapping[str, Price] = field(default_factory=lambda: PRICES)
    """The price table that turns usage into cost (``turnstream.pricing``)."""
    prompt_cache_key: str | None = None
    """OpenAI's ``prompt_cache_key`` for every step (None: one per session, from its id)."""


__all__ = ["RunConfig"]
