"""Server tools an operator adds: ``--tools package.module:NAME`` (``TURNSTREAM_TOOLS``) names a
list of ``@tool`` functions (or one) that join every session's toolset; ``--mcp-config FILE``
(``TURNSTREAM_MCP_CONFIG``) names MCP servers whose tools join it too.

The module is imported in the server's process, with the server's rights: only the operator
sets this, never a client.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TextIO, cast

from ..errors import UsageError
from .tool import Tool
from .toolset import Toolset


def load_tools(path: str) -> list[Tool]:
    """The tools ``module:attribute`` names. ``UsageError`` saying what is wrong otherwise."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--tools must look like package.module:NAME, not {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--tools: cannot import {module_name} ({exc})") from None
    value = getattr(module, attr, None)
    tools = [value] if isinstance(value, Tool) else value
    if not isinstance(tools, list | tuple) or not tools or not all(isinstance(t, Tool) for t in tools):
        raise UsageError(f"--tools: {path} is not a @tool function or a list of them")
    return list(tools)


def load_mcp_servers(path: Path, stderr: TextIO | Callable[[str], TextIO] | None = None,
                     sampling: str = "ask") -> list[Toolset]:
    """The MCP servers of an ``--mcp-config`` file, answering sampling requests as ``sampling``
    (``TURNSTREAM_MCP_SAMPLING``: ask, allow, deny) says, a stdio server's standard error going to
    ``stderr`` (a file, or a function of the server's name giving one); ``UsageError`` saying
    what is wrong."""
    try:
        from ..mcp import toolsets_from_config
    except ImportError as exc:
        raise UsageError(f"--mcp-config needs the MCP extra: pip install 'turnstream[mcp]' ({exc})") from None
    if sampling not in ("ask", "allow", "deny"):
        raise UsageError(f"TURNSTREAM_MCP_SAMPLING must be ask, allow or deny, not {sampling!r}")
    mode = cast('Literal["ask", "allow", "deny"]', sampling)
    return list(toolsets_from_config(str(path), stderr=stderr, sampling=mode))


__all__ = ["load_mcp_servers", "load_tools"]
