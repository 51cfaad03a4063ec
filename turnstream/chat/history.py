"""Stored exchanges shown in the terminal chat: the last ones of a resumed session's branch, and
the one a branch ends with (``/branches``)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..blocks import TextBlock, Turn


def show_history(console: Console, turns: list[Turn], keep: int = 3) -> None:
    if not turns:
        return
    console.print(f"[dim]… {len(turns)} earlier turn(s); the last ones:[/]", highlight=False)
    for t in turns[-keep:]:
        show_exchange(console, t)


def answer_of(turn: Turn) -> tuple[str, str | None]:
    """The turn's final answer (the text of its last step) and the agent that gave it."""
    last = [b for b in turn.blocks if isinstance(b, TextBlock) and b.step == turn.steps]
    return "".join(b.text for b in last).strip(), (last[0].agent if last else None)


def show_exchange(console: Console, turn: Turn) -> None:
    """One stored exchange: the message, then the answer dimmed."""
    console.print(f"[bold]you ›[/] {escape(turn.input)}", highlight=False)
    answer, agent = answer_of(turn)
    if answer:
        who = f"[bold magenta]{escape(agent)}:[/] " if agent else ""
        console.print(who + f"[dim]{escape(answer)}[/]", highlight=False)
