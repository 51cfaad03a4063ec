"""Only a message that is nothing but a goodbye or thanks skips the model (SPEC §11)."""

from __future__ import annotations

import pytest

from turnstream.chat.farewell import is_farewell

FAREWELL = True
MODEL = False

CASES = [
    # the examples the spec and the field report name
    ("thanks, now read setup.py", MODEL),
    ("bye!", FAREWELL),
    ("thank you, that's all", FAREWELL),
    ("no", MODEL),
    ("no, use the other file", MODEL),
    ("thanks, that's all I need, bye!", FAREWELL),
    ("thanks bye", FAREWELL),
    # plain farewells and thanks
    ("bye", FAREWELL),
    ("Bye.", FAREWELL),
    ("BYE!!!", FAREWELL),
    ("byeee", FAREWELL),
    ("bye bye", FAREWELL),
    ("bye-bye", FAREWELL),
    ("goodbye 👋", FAREWELL),
    ("👋", FAREWELL),
    ("good night!", FAREWELL),
    ("see you later", FAREWELL),
    ("cya", FAREWELL),
    ("take care :)", FAREWELL),
    ("thanks!", FAREWELL),
    ("Thanks!!", FAREWELL),
    ("thank you", FAREWELL),
    ("Thank you so much!", FAREWELL),
    ("thx", FAREWELL),
    ("ty 🙏", FAREWELL),
    ("cheers", FAREWELL),
    ("much appreciated", FAREWELL),
    ("thanks a lot, bye", FAREWELL),
    ("thanks for the help!", FAREWELL),
    ("thanks again", FAREWELL),
    ("ok thanks bye", FAREWELL),
    ("okay, thank you!", FAREWELL),
    ("great, thanks", FAREWELL),
    ("that's all, thanks", FAREWELL),
    ("That’s all, thanks.", FAREWELL),
    ("that's all", FAREWELL),
    ("  thanks   \n", FAREWELL),
    ("perfect, that's it. thanks!", FAREWELL),
    ("all good, thanks", FAREWELL),
    ("have a good one", FAREWELL),
    ("exit", FAREWELL),
    # a farewell or thanks that opens a request goes to the model
    ("thanks! what about main.py?", MODEL),
    ("thanks, but the output looks wrong", MODEL),
    ("thanks for reading the file, now list src", MODEL),
    ("bye the way, can you read setup.py", MODEL),
    ("by the way, what's in README.md?", MODEL),
    ("thank you, can you also compute 2**10", MODEL),
    ("cheers, one more thing", MODEL),
    ("goodbye world program in python?", MODEL),
    ("thanks.py", MODEL),
    ("read thanks.txt", MODEL),
    # short answers to the model are not farewells
    ("ok", MODEL),
    ("yes", MODEL),
    ("yes thanks", MODEL),
    ("no thanks", MODEL),
    ("sure", MODEL),
    ("done", MODEL),
    ("later", MODEL),
    ("all good", MODEL),
    ("great", MODEL),
    ("stop", MODEL),
    # nothing to go on
    ("", MODEL),
    ("   ", MODEL),
    ("!!!", MODEL),
    ("🙂", MODEL),
    ("hello", MODEL),
    ("hi there", MODEL),
    ("list the files", MODEL),
    ("thanks " * 20, MODEL),
]


@pytest.mark.parametrize(("message", "expected"), CASES, ids=[repr(m)[:40] for m, _ in CASES])
def test_is_farewell(message: str, expected: bool) -> None:
    assert is_farewell(message) is expected


def test_table_is_big_enough() -> None:
    assert len(CASES) >= 30
    assert sum(1 for _, e in CASES if e) >= 15
    assert sum(1 for _, e in CASES if not e) >= 15
