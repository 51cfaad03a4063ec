"""``/edit``'s pre-filled input line (turnstream/chat/editline.py): keys as the terminal sends them,
the editing, and the drawing of a line that wraps, checked on a terminal emulator (pyte)."""

from __future__ import annotations

import random

import pyte
import pytest
from rich.cells import cell_len

from turnstream.chat.editline import PROMPT, Line, _after_key, _Drawn, keys


def test_keys_as_a_terminal_sends_them() -> None:
    assert keys("ab\x1b[D\x1b[3~\x7f\x15\x17\r") == ["a", "b", "left", "delete", "backspace", "kill", "word", "enter"]
    assert keys("\x1bOH\x1b[4~\x01\x05\x03\x1b") == ["home", "end", "home", "end", "interrupt", "escape"]
    assert keys("x\x1b[1;5Cy\x07") == ["x", "y"]  # an unknown sequence and a bell are dropped
    assert keys("é😀") == ["é", "😀"]
    text = "ab\x1b[Dc\nrest\n"
    assert text[_after_key(text, 4):] == "rest\n"  # what follows the Enter is given back


@pytest.mark.parametrize(("start", "presses", "text", "pos"), [
    ("two", [",", " ", "x"], "two, x", 6),
    ("two", ["home", "X"], "Xtwo", 1),
    ("two", ["left", "backspace"], "to", 1),
    ("two", ["left", "left", "delete"], "to", 1),
    ("one two", ["left", "left", "kill"], "wo", 0),
    ("one two  three", ["word"], "one two  ", 9),
    ("one two", ["home", "word", "end", "right"], "one two", 7),
    ("", ["backspace", "left", "delete"], "", 0),
])
def test_editing(start: str, presses: list[str], text: str, pos: int) -> None:
    line = Line(start)
    for key in presses:
        line.press(key)
    assert (line.text, line.pos) == (text, pos)


def test_a_wrapped_line_is_drawn_whole_and_the_cursor_where_the_text_says() -> None:
    """Random edits of a line that wraps over several rows of a narrow terminal (widths that put
    its end exactly on a row's last column included): after each, the screen shows the prompt and
    the text, nothing else, and the cursor stands at the edit position."""
    rng = random.Random(28)
    width = 16
    prompt = cell_len(PROMPT)
    alphabet = ["a", "b", "c", " ", "é", "left", "right", "home", "end", "backspace", "delete", "word"]
    for _ in range(40):
        screen = pyte.Screen(width, 12)
        stream = pyte.Stream(screen)
        stream.feed(PROMPT)
        line = Line("x" * rng.randrange(0, 40))
        drawn = _Drawn(stream.feed, width, prompt)
        drawn.draw(line)
        for _ in range(30):
            line.press(rng.choice(alphabet))
            drawn.draw(line)
            shown = "".join(screen.display).rstrip()
            assert shown == (PROMPT + line.text).rstrip(), (line.text, line.pos)
            assert (screen.cursor.y, screen.cursor.x) == divmod(prompt + line.pos, width), (line.text, line.pos)
        drawn.leave(line)
        assert screen.cursor.x == 0 and screen.cursor.y == (prompt + len(line.text)) // width + 1
