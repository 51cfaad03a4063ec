"""MCP tool servers as toolsets (``pip install 'turnstream[mcp]'``): ``MCPToolset`` and the
``--mcp-config`` file. See docs/mcp.md."""

from ..errors import MissingExtraError
from .config import MCPConfig, ServerConfig, load_mcp_config, parse_mcp_config
from .names import tool_name

try:
    from .toolset import MCPServerError, MCPToolError, MCPToolset, toolsets_from_config
except ModuleNotFoundError as exc:  # the SDK is the extra: say how to install it, not just its name
    if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
        raise
    raise MissingExtraError("mcp", "The MCP SDK (the mcp package)") from exc

__all__ = ["MCPConfig", "MCPServerError", "MCPToolError", "MCPToolset", "ServerConfig", "load_mcp_config",
           "parse_mcp_config", "tool_name", "toolsets_from_config"]
