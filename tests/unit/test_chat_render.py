"""The terminal chat's usage line (``chat/render.py``): a turn whose server reported no token
counts says so rather than showing 0 tokens."""

from __future__ import annotations

import io

from rich.console import Console

from turnstream.blocks import Usage
from turnstream.chat.render import Renderer, usage_line
from turnstream.events import StepUsage, TurnComplete


def test_known_usage_is_counted() -> None:
    line = usage_line(Usage(input_tokens=1234, output_tokens=56), 4_200_000, 2)
    assert line == "1,234 in · 56 out · $0.0042 · 2 steps"


def test_unknown_usage_is_said_not_shown_as_zero() -> None:
    assert usage_line(Usage(unknown=True), None, 1) == "usage unknown · 1 step"
    assert usage_line(Usage(input_tokens=10, output_tokens=5, unknown=True), None, 3) == (
        "10 in · 5 out · usage of some steps unknown · 3 steps")


def test_the_renderer_prints_it_under_the_answer() -> None:
    out = io.StringIO()
    r = Renderer(Console(file=out, width=120))
    r.handle(StepUsage(step=1, usage=Usage(unknown=True)))
    r.handle(TurnComplete(status="complete", stop_reason="end_turn", usage=Usage(unknown=True), steps=1))
    assert "↳ usage unknown · 1 step" in out.getvalue()
    assert "0 in" not in out.getvalue()
