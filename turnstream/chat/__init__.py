"""The terminal chat (SPEC §11): ``turnstream chat``.

``render`` shows a turn's events, ``ui`` reads input and runs one turn at a time, ``local``
runs the turns here, ``remote`` runs them on a turnstream server (this process runs the
tools), ``farewell`` tells a goodbye from a message.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from ..errors import UsageError
from ..settings import CHAT_DEMO, Settings
from ..tools.toolset import Toolset
from .local import _log_to_file, run_chat


def main(settings: Settings, *, session: str | None = None) -> int:
    """``turnstream chat`` with the given settings (``model``, ``root``, ``server``, ``key``,
    ``home``). With ``server`` the turns run there and the local tools run here."""
    home = settings.chat_home()
    _log_to_file(home / "chat.log")
    if settings.server:
        if settings.mcp_config is not None:
            print("error: with --server, MCP servers are the server's own (turnstream serve --mcp-config)",
                  file=sys.stderr)
            return 2
        from .remote import run_remote_chat

        return asyncio.run(run_remote_chat(settings.server, settings.key, settings.root, session,
                                           model=settings.model or None))
    model, demo = settings.default_model(CHAT_DEMO)
    if demo:
        root = settings.root.expanduser().resolve()
        print(f"No --model and no API key: the offline demo ({model}) answers, a script that uses the real "
              f"tools on {root}. Try: what is here? · read <file> · list <folder> · 2**10 / 7", file=sys.stderr)
    try:
        mcp_servers = _mcp_servers(settings, home / "mcp-servers.log")
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(run_chat(model, settings.root, session, home=home, extra_tools=mcp_servers,
                                settings=settings))


def _mcp_servers(settings: Settings, log: Path) -> list[Toolset]:
    """The ``--mcp-config`` servers, their stderr going to ``log`` rather than over the chat."""
    if settings.mcp_config is None:
        return []
    from ..tools.loading import load_mcp_servers

    log.parent.mkdir(parents=True, exist_ok=True)
    return load_mcp_servers(settings.mcp_config, stderr=log.open("a", encoding="utf-8"),
                            sampling=settings.mcp_sampling)


__all__ = ["main", "run_chat"]
