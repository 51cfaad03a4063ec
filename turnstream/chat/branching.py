"""``/retry``, ``/edit`` and ``/branches`` in the terminal chat, and ``/help`` (docs/terminal.md).

A session's turns form a tree (docs/branches.md). The chat shows one branch, the path that ends
at the session's current leaf; its **last exchange** is that leaf. ``/retry`` answers its message
again, as a new turn beside it; ``/edit`` sends a new message in its place (a turn after the
turn before it); either new turn becomes the current leaf. A **branch** of the session is a path
that ends at a turn nothing follows; ``/branches`` lists them, numbered, and ``/branches N``
switches to one and shows its last exchange.

``Branching`` holds what the three commands share; ``LocalBranching`` runs them on the chat's own
``Agent`` and store, ``RemoteBranching`` on the server's routes (``…/regenerate``, ``PUT …/current``).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from .. import branches
from ..agent import Agent
from ..blocks import Turn, UserBlock
from ..client import RemoteAPI
from ..content import MediaPart, part_of
from ..errors import RemoteError, TurnstreamError
from .editline import edit_line
from .history import answer_of, show_exchange
from .typed import ATTACH
from .ui import ChatUI

Command = Callable[[str], Awaitable[None]]

RETRY, EDIT, BRANCHES, HELP = "/retry", "/edit", "/branches", "/help"

HELP_LINES: list[tuple[str, str]] = [
    (RETRY, "answer your last message again (the earlier answer is kept: /branches)"),
    (f"{EDIT} [TEXT]", "change your last message and send it again (the earlier one is kept: /branches)"),
    (BRANCHES, "list the branches of this conversation; /branches N switches to branch N"),
    (f"{ATTACH} PATH", "add an image or a PDF to your next message"),
    (HELP, "these lines"),
]
SNIPPET = 60


def _short(text: str, size: int = SNIPPET) -> str:
    one = " ".join(text.split())
    return one if len(one) <= size else one[: size - 1] + "…"


def branch_ends(turns: Sequence[Turn], leaf: str | None) -> list[Turn]:
    """The turns that end a branch (nothing follows them), in creation order; the current leaf
    among them even when turns follow it (a branch switched to halfway)."""
    parents = {t.parent_turn_id for t in turns}
    return [t for t in turns if t.id not in parents or t.id == leaf]


class Branching(ABC):
    """The three commands over one session's tree; subclasses say how to read it and start turns."""

    def __init__(self, chat: ChatUI) -> None:
        self.chat = chat

    @abstractmethod
    async def tree(self) -> tuple[list[Turn], str | None]:
        """Every turn of the session, in creation order, and its current leaf."""

    @abstractmethod
    async def start(self, message: str, parent: str) -> None:
        """Run a turn for ``message`` after turn ``parent`` (``branches.ROOT``: a new first message)."""

    @abstractmethod
    async def again(self, turn: Turn) -> None:
        """Run ``turn``'s message again, as a new turn beside it."""

    @abstractmethod
    async def switch(self, turn_id: str) -> None:
        """Make ``turn_id`` the session's current leaf."""

    def commands(self, extra: Sequence[tuple[str, str, Command]] = ()) -> dict[str, Command]:
        """The chat's commands by name: these three, ``extra`` ((name, help, handler)), ``/help``."""
        table: dict[str, Command] = {RETRY: self.retry, EDIT: self.edit, BRANCHES: self.branches}
        lines = [*HELP_LINES[:-1], *((name, text) for name, text, _ in extra), HELP_LINES[-1]]
        table.update({name: handler for name, _, handler in extra})

        async def show_help(args: str) -> None:
            show_commands(self.chat.console, lines)

        table[HELP] = show_help
        return table

    async def _last(self) -> Turn | None:
        try:
            turns, leaf = await self.tree()
        except (TurnstreamError, RemoteError) as exc:
            self.chat.error(str(exc))
            return None
        path = branches.path(turns, leaf)
        if not path:
            self.chat.console.print("[dim]no message yet in this conversation[/]", highlight=False)
            return None
        return path[-1]

    async def retry(self, args: str) -> None:
        """``/retry``: the last message answered again; the new answer is the current branch."""
        last = await self._last()
        if last is not None:
            self.chat.console.print(f"[dim]↻ answering again: {escape(_short(last.input))}[/]", highlight=False)
            await self.again(last)

    async def edit(self, args: str) -> None:
        """``/edit [TEXT]``: the last message replaced by TEXT, or by the line edited from it."""
        last = await self._last()
        if last is None:
            return
        text = args or await edit_line(self.chat, last.input)
        if text is None or not text.strip() or text.strip() == last.input.strip():
            self.chat.console.print("[dim]edit cancelled: nothing was sent[/]", highlight=False)
            return
        await self.start(text.strip(), last.parent_turn_id or branches.ROOT)

    async def branches(self, args: str) -> None:
        """``/branches``: the session's branches, numbered; ``/branches N``: switch to branch N."""
        try:
            turns, leaf = await self.tree()
        except (TurnstreamError, RemoteError) as exc:
            self.chat.error(str(exc))
            return
        ends = branch_ends(turns, leaf)
        console = self.chat.console
        if not ends:
            console.print("[dim]no message yet in this conversation[/]", highlight=False)
            return
        if not args:
            console.print(f"[bold]{len(ends)} branch(es)[/] [dim](/branches N switches; ▸ is the one shown)[/]",
                          highlight=False)
            for n, end in enumerate(ends, 1):
                mark = "▸" if end.id == leaf else " "
                answer = _short(answer_of(end)[0]) or f"({end.status})"
                console.print(f"{mark} {n}. [dim]turn {len(branches.path(turns, end.id))} ·[/] you › "
                              f"{escape(_short(end.input))} [dim]· {escape(answer)}[/]", highlight=False)
            return
        if not args.isdigit() or not 1 <= int(args) <= len(ends):
            self.chat.error(f"no branch {args}: choose 1 to {len(ends)} (/branches lists them)")
            return
        chosen = ends[int(args) - 1]
        try:
            await self.switch(chosen.id)
        except (TurnstreamError, RemoteError) as exc:
            self.chat.error(str(exc))
            return
        console.print(f"[dim]now on branch {args} of {len(ends)}; its last exchange:[/]", highlight=False)
        show_exchange(console, chosen)


def show_commands(console: Console, lines: Sequence[tuple[str, str]]) -> None:
    """``/help``: each command with what it does, then how to leave."""
    width = max(len(name) for name, _ in lines)
    for name, text in lines:
        console.print(f"  [bold]{escape(name.ljust(width))}[/]  {escape(text)}", highlight=False)
    console.print(f"  [bold]{'bye'.ljust(width)}[/]  leave (so do Ctrl-D and Ctrl-C twice); "
                  "Ctrl-C while it answers stops the answer", highlight=False)


class LocalBranching(Branching):
    """The commands on the chat's own agent and store."""

    def __init__(self, chat: ChatUI, agent: Agent, session_id: str) -> None:
        super().__init__(chat)
        self.agent = agent
        self.session_id = session_id

    async def tree(self) -> tuple[list[Turn], str | None]:
        store = self.agent.store
        session = await store.get_session(self.session_id)
        return await store.list_turns(self.session_id), session.current_leaf if session else None

    async def start(self, message: str, parent: str) -> None:
        await self.chat.turn(self.agent, message, self.session_id, parent_turn_id=parent)

    async def again(self, turn: Turn) -> None:
        # Agent.regenerate's turn (same input, same parent), streamed so that it shows as it comes.
        refs = [a for b in turn.blocks if isinstance(b, UserBlock) and b.step == 0 for a in b.attachments]
        blobs = await self.agent.store.get_blobs({a.sha256 for a in refs}) if refs else {}
        parts: list[MediaPart] = [part_of(a.media_type, blobs[a.sha256], a.name) for a in refs if a.sha256 in blobs]
        await self.chat.turn(self.agent, turn.input, self.session_id, parts,
                             parent_turn_id=turn.parent_turn_id or branches.ROOT)

    async def switch(self, turn_id: str) -> None:
        await self.agent.store.set_current_leaf(self.session_id, turn_id)


class RemoteSend(Protocol):
    """``RemoteChat.send``: a turn followed to its end (after ``parent``, or ``again`` a turn's message)."""

    def __call__(self, message: str, parts: Sequence[MediaPart] = (), *, parent: str | None = None,
                 again: str | None = None) -> Awaitable[None]: ...


class RemoteBranching(Branching):
    """The commands on a turnstream server's routes; ``send`` (``RemoteChat.send``) follows the turns."""

    def __init__(self, chat: ChatUI, api: RemoteAPI, session_id: str, send: RemoteSend) -> None:
        super().__init__(chat)
        self.api = api
        self.session_id = session_id
        self.send = send

    @property
    def _path(self) -> str:
        return f"/api/sessions/{self.session_id}"

    async def tree(self) -> tuple[list[Turn], str | None]:
        return await remote_tree(self.api, self.session_id)

    async def start(self, message: str, parent: str) -> None:
        await self.send(message, parent=parent)

    async def again(self, turn: Turn) -> None:
        await self.send(turn.input, again=turn.id)

    async def switch(self, turn_id: str) -> None:
        await self.api.call("PUT", f"{self._path}/current", {"turn_id": turn_id})


async def remote_tree(api: RemoteAPI, session_id: str) -> tuple[list[Turn], str | None]:
    """A server session's turns (``GET /api/sessions/{id}``) and its current leaf."""
    detail: Any = await api.call("GET", f"/api/sessions/{session_id}")
    out: list[Turn] = []
    for raw in detail.get("turns", []) if isinstance(detail, dict) else []:
        with contextlib.suppress(ValidationError):
            out.append(Turn.model_validate(raw))
    leaf = detail.get("current_leaf") if isinstance(detail, dict) else None
    return out, leaf if isinstance(leaf, str) else None
