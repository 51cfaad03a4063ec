"""An MCP server's question in the terminal chat (a form elicitation): its message, then one
prompt per field of the requested schema (string, number, integer, boolean, a choice, several
choices), checked as typed; an empty line leaves an optional field out. Several choices (an
``array`` whose items are an ``enum``, or ``anyOf`` constants) are given as their numbers or
names separated by commas (``1, 3``), and go as an array, held to ``minItems`` and ``maxItems``.
Each typed value is also held to its field's schema with the check the answer meets on
submission (``elicitation.check_field``: ``minimum``, ``maxLength``, ``pattern``, ``format``
and the rest), and the field asked again with the reason; the whole answer is then checked as
a submission is (``elicitation.check_answer``), and a refused one asks the field it names again
(every field, when it names none) rather than being sent to be refused. Where ``jsonschema`` is
not installed (a ``--server`` chat without the ``mcp`` extra) these two checks are left to the
server.
``/decline`` at any prompt or Ctrl-D declines (Ctrl-C cancels the turn, as anywhere in a turn).
A question without fields (an MCP server asking to use the model, under
``TURNSTREAM_MCP_SAMPLING=ask``) is one yes-or-no prompt: only a yes accepts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape

from ..elicitation import check_answer, check_field
from ..errors import InvalidValue

DECLINE = "/decline"
YES, NO = ("y", "yes", "true", "1"), ("n", "no", "false", "0")


def _choices(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    if isinstance(prop.get("enum"), list):
        given = prop.get("enumNames")
        names: list[Any] = given if isinstance(given, list) else []
        return [(v, str(names[i]) if i < len(names) else str(v)) for i, v in enumerate(prop["enum"])]
    options = prop.get("oneOf") or prop.get("anyOf")
    if isinstance(options, list) and options and all(isinstance(o, dict) and "const" in o for o in options):
        return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


def _several(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    """The choices of a multi-select (an array of an enum), else None."""
    items = prop.get("items")
    return _choices(items) if prop.get("type") == "array" and isinstance(items, dict) else None


def _choose(choices: list[tuple[Any, str]], text: str) -> Any:
    for i, (value, label) in enumerate(choices, 1):
        if text in (str(i), str(value), label):
            return value
    raise ValueError("one of " + ", ".join(label for _, label in choices))


def _pick_several(prop: dict[str, Any], choices: list[tuple[Any, str]], text: str) -> list[Any]:
    picked: list[Any] = []
    for piece in (p.strip() for p in text.split(",")):
        value = _choose(choices, piece) if piece else None
        if piece and value not in picked:
            picked.append(value)
    low, high = prop.get("minItems"), prop.get("maxItems")
    if isinstance(low, int) and len(picked) < low:
        raise ValueError(f"at least {low} of " + ", ".join(label for _, label in choices))
    if isinstance(high, int) and len(picked) > high:
        raise ValueError(f"at most {high} of " + ", ".join(label for _, label in choices))
    return picked


def _parse(prop: dict[str, Any], text: str) -> Any:
    """The typed value of ``text`` for ``prop``; ValueError saying what fits."""
    several = _several(prop)
    if several is not None:
        return _pick_several(prop, several, text)
    choices = _choices(prop)
    if choices is not None:
        return _choose(choices, text)
    kind = prop.get("type")
    if kind == "boolean":
        if text.lower() in YES:
            return True
        if text.lower() in NO:
            return False
        raise ValueError("y or n")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("a whole number") from None
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            raise ValueError("a number") from None
    return text


def _hint(prop: dict[str, Any], required: bool) -> str:
    several, choices = _several(prop), _choices(prop)
    if several is not None:
        low = prop.get("minItems")
        least = f", at least {low}" if isinstance(low, int) and low > 1 else ""
        kind = " / ".join(f"{i} {label}" for i, (_, label) in enumerate(several, 1)) + f"; several, with commas{least}"
    elif choices is not None:
        kind = " / ".join(f"{i} {label}" for i, (_, label) in enumerate(choices, 1))
    else:
        kind = {"boolean": "y/n", "integer": "whole number", "number": "number"}.get(str(prop.get("type")), "text")
    return kind if required else f"{kind}, optional"


_DECLINED, _SKIPPED = object(), object()


def _refusal(check: Callable[..., None], *args: Any) -> InvalidValue | None:
    """The ``InvalidValue`` that ``check(*args)`` raises, else None; None too without
    ``jsonschema`` here, where the server is left to check."""
    try:
        check(*args)
    except InvalidValue as exc:
        return exc
    except ImportError:
        return None
    return None


def _label(key: str, prop: dict[str, Any]) -> str:
    return str(prop.get("title") or key.replace("_", " "))


def _prop(fields: dict[str, Any], key: str) -> dict[str, Any]:
    prop = fields[key]
    return prop if isinstance(prop, dict) else {}


async def _ask_field(ask: Callable[[str], Awaitable[str | None]], console: Console, schema: dict[str, Any],
                     key: str, prop: dict[str, Any], required: bool) -> Any:
    """One field's value, asked until it fits (its type, then its schema); ``_SKIPPED`` for an
    optional field left empty, ``_DECLINED`` when the user declines (``/decline`` or end of
    input)."""
    label = _label(key, prop)
    while True:
        line = await ask(f"[bold yellow]  {escape(label)}[/] [dim]({escape(_hint(prop, required))})[/] ")
        if line is None or line.strip() == DECLINE:
            return _DECLINED
        text = line.strip()
        try:
            if not text:
                if required:
                    raise ValueError("an answer (it is required)")
                return _SKIPPED
            value = _parse(prop, text)
        except ValueError as exc:
            console.print(f"[red]  {escape(label)} needs {escape(str(exc))}[/]", highlight=False)
            continue
        refused = _refusal(check_field, schema, key, value)
        if refused is None:
            return value
        console.print(f"[red]  {escape(label)}: {escape(refused.message)}[/]", highlight=False)


async def ask_elicitation(ask: Callable[[str], Awaitable[str | None]], console: Console, tool_name: str,
                          elicitation: dict[str, Any]) -> dict[str, Any]:
    """Ask the user; the keyword arguments of ``Agent.submit`` that answer (``content``, a JSON
    object as text) or decline (``approved=False``)."""
    schema = elicitation.get("requested_schema") or {}
    required = set(schema.get("required") or [])
    console.print(f"[bold yellow]❓ {escape(tool_name)} asks:[/] {escape(str(elicitation.get('message') or ''))}",
                  highlight=False)
    console.print(f"[dim](answer each field; {DECLINE} declines)[/]", highlight=False)
    fields = schema.get("properties") or {}
    if not fields:
        line = await ask("[bold yellow]  accept?[/] [dim](y/n)[/] ")
        if line is None or line.strip().lower() not in YES:
            console.print("[red]✗ declined[/]", highlight=False)
            return {"approved": False}
        console.print("[green]✓ accepted[/]", highlight=False)
        return {"content": "{}"}
    content: dict[str, Any] = {}
    asking = list(fields)
    while True:
        for key in asking:
            value = await _ask_field(ask, console, schema, key, _prop(fields, key), key in required)
            if value is _DECLINED:
                console.print("[red]✗ declined[/]", highlight=False)
                return {"approved": False}
            content.pop(key, None)
            if value is not _SKIPPED:
                content[key] = value
        refused = _refusal(check_answer, schema, content)
        if refused is None:
            break
        first = refused.path[0] if refused.path else None
        named = first if isinstance(first, str) and first in fields else None
        where = f"{_label(named, _prop(fields, named))}: " if named else ""
        console.print(f"[red]  not taken, {escape(where + refused.message)}; asked again[/]", highlight=False)
        asking = [named] if named else list(fields)
    console.print("[green]✓ answered[/]", highlight=False)
    return {"content": orjson.dumps(content).decode()}
