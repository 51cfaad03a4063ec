"""``turnstream replay SESSION_ID``: print a stored session block by block, with Rich."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from .blocks import (
    Block,
    CompactionBlock,
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    UserBlock,
)
from .branches import path
from .settings import DatabaseURL
from .store import open_store


def describe(block: Block) -> str:
    """One block as a line of Rich markup."""
    head = f"[dim]#{block.seq} step {block.step}[/dim] "
    if isinstance(block, TextBlock):
        return head + escape(block.text)
    if isinstance(block, ThinkingBlock):
        return head + f"[italic dim]thinking: {escape(block.thinking)}[/italic dim]"
    if isinstance(block, RedactedThinkingBlock):
        return head + "[dim](redacted thinking)[/dim]"
    if isinstance(block, ToolUseBlock):
        note = f" [red]({escape(block.input_error)})[/red]" if block.input_error else ""
        return head + f"[cyan]→ {block.name}[/cyan] {escape(json.dumps(block.input))}{note}"
    if isinstance(block, ToolResultBlock):
        style = "red" if block.is_error else "green"
        return head + f"[{style}]← {escape(block.content[:2000])}[/{style}]"
    if isinstance(block, ProviderBlock):
        return head + f"[magenta]{block.provider} {escape(str(block.data.get('type', 'block')))}[/magenta]"
    if isinstance(block, UserBlock):
        return head + f"[green]user, while it worked: {escape(block.text)}[/green]"
    if isinstance(block, CompactionBlock):
        return head + f"[yellow]summary of the first {block.covers} turns: {escape(block.summary)}[/yellow]"
    raise AssertionError(f"unknown block {block!r}")


def _turn(out: Console, turn: Turn, label: str) -> None:
    out.print(f"\n[bold]user:[/bold] {escape(turn.input)} [dim]({label})[/dim]")
    for block in turn.blocks:
        out.print(describe(block))
    usage = turn.usage
    out.print(f"[dim]{turn.status} · {turn.stop_reason} · {turn.steps} step(s) · "
              f"{usage.input_tokens} in / {usage.output_tokens} out[/dim]")


async def replay(session_id: str, *, db: str | DatabaseURL | None = None, console: Console | None = None) -> int:
    out = console or Console()
    store = open_store(db)
    await store.open()
    try:
        session = await store.get_session(session_id, with_turns=True)
        if session is None:
            out.print(f"[red]no session {escape(session_id)}[/red]")
            return 1
        out.print(f"[bold]{escape(session.title or session.id)}[/bold] [dim]{session.model}[/dim]")
        # The branch the session shows, from its first turn; then every other version, each
        # saying which turn it follows (docs/branches.md). Turns are numbered in creation order.
        shown = path(session.turns, session.current_leaf) or session.turns
        number = {t.id: i for i, t in enumerate(session.turns, 1)}
        for turn in shown:
            _turn(out, turn, f"#{number[turn.id]}")
        others = [t for t in session.turns if t not in shown]
        if others:
            out.print("\n[bold]Other branches[/bold] [dim](versions not on the branch shown)[/dim]")
            for turn in others:
                after = f"after #{number[turn.parent_turn_id]}" if turn.parent_turn_id in number else "a first turn"
                _turn(out, turn, f"#{number[turn.id]}, {after}")
        return 0
    finally:
        await store.aclose()
