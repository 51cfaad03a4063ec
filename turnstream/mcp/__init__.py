"""MCP tool servers as toolsets (``pip install 'turnstream[mcp]'``): ``MCPToolset`` and the
``--mcp-config`` file. See docs/mcp.md."""

from .config import MCPConfig, ServerConfig, load_mcp_config, parse_mcp_config
from .names import tool_name
from .toolset import MCPServerError, MCPToolError, MCPToolset, toolsets_from_config

__all__ = ["MCPConfig", "MCPServerError", "MCPToolError", "MCPToolset", "ServerConfig", "load_mcp_config",
           "parse_mcp_config", "tool_name", "toolsets_from_config"]
