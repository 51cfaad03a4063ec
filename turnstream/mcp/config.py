"""The ``--mcp-config`` file (``TURNSTREAM_MCP_CONFIG``): MCP servers in the ``mcpServers`` JSON
format that Claude Desktop, Cursor and VS Code use, with turnstream's per-server policy::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"ROOT": "/data"}},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"},
                   "requires_approval": true, "timeout": 60, "tools": ["search"]}}}

A server has ``command`` (stdio: ``args``, ``env``, ``cwd``) or ``url`` (streamable HTTP:
``headers``), never both. ``requires_approval`` (default false), ``timeout`` (seconds, default
30) and ``tools`` (an allow-list of the server's own tool names; all when absent) apply to
each of its tools. A file that does not fit fails start-up with the path of the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import UsageError
from ..json_depth import MAX_DEPTH, too_deep
from ..tools.tool import DEFAULT_TIMEOUT
from .names import server_name_problem


class ServerConfig(BaseModel):
    """One entry of ``mcpServers``."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = Field(None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    requires_approval: bool = False
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0)
    tools: list[str] | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server)")
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd go with command, not url")
        if self.url is None and self.headers:
            raise ValueError("headers go with url, not command")
        return self


class MCPConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mcpServers: dict[str, ServerConfig]  # the name the format uses

    @field_validator("mcpServers")
    @classmethod
    def _names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in servers:
            problem = server_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
        return servers


def parse_mcp_config(data: Any, *, source: str = "the MCP config") -> MCPConfig:
    """The config in ``data`` (parsed JSON); ``UsageError`` naming the field otherwise."""
    try:
        return MCPConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            problems.append(f"{loc}: {err['msg']}")
        raise UsageError(f"{source}: " + "; ".join(problems)) from None


def load_mcp_config(path: str | Path) -> MCPConfig:
    """Read and check an ``mcpServers`` file; ``UsageError`` saying what is wrong otherwise."""
    source = f"--mcp-config {path}"
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{source}: cannot read it ({exc.strerror or exc})") from None
    if too_deep(raw):
        raise UsageError(f"{source}: the JSON is nested deeper than {MAX_DEPTH} levels")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{source}: not valid JSON ({exc})") from None
    return parse_mcp_config(data, source=source)


__all__ = ["MCPConfig", "ServerConfig", "load_mcp_config", "parse_mcp_config"]
