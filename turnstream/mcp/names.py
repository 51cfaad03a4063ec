"""How an MCP tool is named to the model: ``server__tool``.

Providers take tool names matching ``^[a-zA-Z0-9_-]{1,64}$``. A server's name (the key in the
config file) is checked against ``SERVER_NAME`` (those characters, at most 30, no ``__``), so
the first ``__`` of a tool's name always ends the server's part and two servers can never
produce the same name. The tool's own name is kept when it fits; otherwise (a character
outside the rule, or a name too long) the characters outside the rule become ``_``, it is cut
to fit, and ``_`` plus eight hex digits of the SHA-256 of the original name is appended, so
two different originals still get different names.
"""

from __future__ import annotations

import hashlib
import re

NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SERVER_NAME = re.compile(r"^(?!.*__)[a-zA-Z0-9_-]{1,30}$")
SEPARATOR = "__"
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")
_MAX = 64


def server_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an MCP server, or None."""
    if SERVER_NAME.match(name):
        return None
    return ("an MCP server's name must be 1 to 30 letters, digits, '_' or '-', without '__' "
            f"(it prefixes its tools' names): {name!r}")


def tool_name(server: str, remote: str) -> str:
    """The name the model sees for the tool ``remote`` of ``server`` (see the module's rule)."""
    prefix = server + SEPARATOR
    whole = prefix + remote
    if NAME_RULE.match(whole):
        return whole
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    cleaned = _OUTSIDE.sub("_", remote)
    room = _MAX - len(prefix) - len(digest) - 1
    return f"{prefix}{cleaned[:room]}_{digest}"


__all__ = ["NAME_RULE", "SEPARATOR", "SERVER_NAME", "server_name_problem", "tool_name"]
