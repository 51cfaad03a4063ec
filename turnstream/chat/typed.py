"""What a line typed in the terminal chat means: an approval question's answer (with the
user's reason for a no), and a file's path as a terminal's drag and drop types it (for
``/attach``, or a line that is only such a path). Pure functions of the text, but ``attach``.
"""

from __future__ import annotations

import mimetypes
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from rich.console import Console
from rich.markup import escape

from ..content import IMAGE_TYPES, PDF, MediaPart, check_parts, part_from_path
from ..errors import ContentRejected


@dataclass(frozen=True, slots=True)
class Answer:
    """The user's answer to an approval question."""

    allow: bool
    always: bool = False
    reason: str | None = None
    """Why not, in the user's words: the model reads it in the denied call's result."""


_WHY_NOT = re.compile(r"(?:n|no)\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)


def read_answer(text: str | None) -> Answer:
    """``y``/``yes`` allows, ``a``/``always`` allows for the rest of the session; Enter, ``n``,
    ``no`` (or Ctrl-C) deny; ``n: the words`` or any other words deny, those words being the
    reason the model reads."""
    said = (text or "").strip()
    word = said.lower()
    if word in ("y", "yes"):
        return Answer(True)
    if word in ("a", "always"):
        return Answer(True, always=True)
    if word in ("", "n", "no"):
        return Answer(False)
    why = _WHY_NOT.fullmatch(said)
    return Answer(False, reason=(why.group(1) if why else said).strip() or None)


ATTACH = "/attach"


def dropped_path(text: str) -> Path | None:
    """The one path ``text`` holds as a terminal types a file dropped on it: quoted with ' or ",
    spaces escaped with backslashes, or a ``file://`` URL; None when it is not one word."""
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote
        return None
    if len(words) != 1:
        return None
    word = words[0]
    if word.startswith("file://"):
        word = unquote(urlsplit(word).path)
    return Path(word).expanduser()


def dropped_attachment(line: str) -> Path | None:
    """A line that is only the path of an image or PDF, absolute as drag and drop gives it (or
    from ``~``), of a file that exists: the file to attach rather than a message to send."""
    path = dropped_path(line)
    if path is None or not path.is_absolute():
        return None
    kind = mimetypes.guess_type(path.name)[0]
    return path if (kind in IMAGE_TYPES or kind == PDF) and path.is_file() else None


def attach(console: Console, line: str, pending: list[MediaPart]) -> None:
    """``/attach PATH``: an image or PDF for the next message, one line saying what was taken
    (or why not: the same type and size checks as the library's). ``PATH`` may be quoted or
    escaped as drag and drop types it (``dropped_path``); otherwise it is taken as written."""
    arg = line[len(ATTACH):].strip()
    if not arg:
        console.print("[dim]usage: /attach PATH (a PNG, JPEG, GIF or WebP image, or a PDF)[/]", highlight=False)
        return
    path = dropped_path(arg) or Path(arg).expanduser()
    try:
        part = part_from_path(path)
        check_parts([*pending, part])
    except (OSError, ContentRejected) as exc:
        console.print(f"[bold red]error:[/] [red]{escape(str(path))}: {escape(str(exc))}[/]", highlight=False)
        return
    pending.append(part)
    console.print(f"[dim]📎 {escape(part.name or str(path))} ({part.media_type}, {len(part.data)} bytes) goes with "
                  "your next message[/]", highlight=False)


__all__ = ["ATTACH", "Answer", "attach", "dropped_attachment", "dropped_path", "read_answer"]
