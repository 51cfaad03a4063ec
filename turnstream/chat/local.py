"""``turnstream chat`` with the turns run here: one ``Agent.stream`` per message, the history in
a SQLite file so ``--session`` resumes a conversation, the file tools confined to ``--root``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from .. import branches
from ..agent import LOCAL_USER, Agent, open_store_url
from ..blocks import Turn
from ..content import MediaPart
from ..errors import TurnstreamError
from ..settings import Settings
from ..store import Store
from ..tools.tool import Tool
from ..tools.toolset import Toolset
from ..toolsets import calculator_tool, make_file_tools
from .branching import LocalBranching
from .history import show_history
from .servers import MCP_COMMAND, show_and_retry, watch
from .ui import ChatUI, LineReader, converse

SYSTEM_PROMPT = """\
You are a helpful assistant in a terminal. You can read files under {root} with list_directory \
and read_file (paths are relative to that directory), and compute with calculator.
Call a tool only when the answer needs it: for greetings, thanks and small talk, just answer. \
When the tools have given you what you need, answer in plain words and stop."""


def chat_db_url(home: Path) -> str:
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'chat.db'}"


async def _open_session(store: Store, session: str | None, model: str) -> tuple[str, list[Turn]]:
    await store.open()
    if session is not None and (found := await store.get_session(session)) is not None:
        return session, branches.path(await store.list_turns(session), found.current_leaf)
    created = await store.create_session(LOCAL_USER, model=model, session_id=session)
    return created.id, []


async def run_chat(
    model: str,
    root: Path,
    session: str | None = None,
    *,
    db: str | None = None,
    home: Path | None = None,
    system: str | None = None,
    max_steps: int = 10,
    extra_tools: Sequence[Tool | Toolset] = (),
    settings: Settings | None = None,
    console: Console | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Run the terminal chat until the user leaves; returns the exit status.

    ``model`` is ``provider:model``; ``root`` is the directory the file tools may read;
    ``session`` resumes a stored conversation (or starts one under that id); ``db``
    overrides the store URL (default ``sqlite:///<home>/chat.db``, ``home`` being
    ``settings.chat_home()`` unless given); ``extra_tools``
    are added to ``list_directory``, ``read_file`` and ``calculator`` (MCP servers among them
    are closed when the chat ends); ``settings`` (budgets, prices, home) are the command's,
    else read from the environment.
    """
    settings = settings or Settings.from_env()
    console = console or Console(highlight=False)
    chat = ChatUI(console, LineReader(stdin))
    try:
        real_root = root.expanduser().resolve(strict=True)
        tools = [*make_file_tools(real_root), calculator_tool, *extra_tools]
        store = open_store_url(db or chat_db_url(home or settings.chat_home()))
        # No approval hook: a tool that needs approval pauses the turn, and the chat asks
        # (ChatUI.turn), so that a denial can carry the user's reason to the model.
        agent = Agent(model, tools=tools, system=system or SYSTEM_PROMPT.format(root=real_root),
                      limits=settings.limits(max_steps=max_steps), store=store,
                      prices=settings.price_table())
    except (TurnstreamError, OSError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    try:
        session_id, history = await _open_session(store, session, agent.provider.origin)
        agent.session_id = session_id
        console.print(f"[bold]turnstream chat[/] · {escape(model)} · files under {escape(str(real_root))}",
                      highlight=False)
        console.print(f"[dim]session {session_id} · Ctrl-C stops a reply · Ctrl-D or 'bye' quits[/]",
                      highlight=False)
        show_history(console, history)

        async def steer(text: str) -> bool:
            return await agent.send(session_id, text)

        chat.steer = steer

        async def send(message: str, parts: list[MediaPart]) -> None:
            await chat.turn(agent, message, session_id, parts)

        servers = watch(console, extra_tools)

        async def show_servers(args: str) -> None:
            show_and_retry(console, servers)

        extra = [(MCP_COMMAND, "each MCP server's state; those that failed are tried again", show_servers)]
        commands = LocalBranching(chat, agent, session_id).commands(extra if servers else ())
        await converse(chat, send, f"turnstream chat --session {session_id}", commands=commands)
        return 0
    finally:
        await agent.aclose()


def _log_to_file(path: Path) -> None:
    """Warnings (a tool's traceback, a transcript repair) go to a file, not over the chat."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("turnstream")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
