"""The terminal chat's form for an MCP server's question (``chat/elicit.py``): a multi-select
(an array of an enum, as server-everything's ``trigger-elicitation-request`` asks) is asked as
one, and answered with an array (issue 27, item 6)."""

from __future__ import annotations

import io

import orjson
from rich.console import Console

from turnstream.chat.elicit import ask_elicitation

PALETTE = {"type": "object", "required": ["colors", "size"], "properties": {
    "colors": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": ["red", "green", "blue"]}},
    "size": {"type": "string", "enum": ["S", "M", "L"]},
    "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "Apples"},
                                                  {"const": "b", "title": "Pears"}]}}}}


async def _answer(lines: list[str], schema: dict[str, object]) -> tuple[dict[str, object], list[str], str]:
    prompts: list[str] = []
    queue = list(lines)

    async def ask(prompt: str) -> str | None:
        prompts.append(prompt)
        return queue.pop(0) if queue else None

    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    answer = await ask_elicitation(ask, console, "paint", {"message": "Which colours?", "requested_schema": schema})
    return answer, prompts, out.getvalue()


async def test_a_multi_select_is_asked_as_one_and_answered_with_an_array() -> None:
    answer, prompts, shown = await _answer(["", "4", "1, blue, 1", "2", "Pears"], PALETTE)
    assert orjson.loads(str(answer["content"])) == {"colors": ["red", "blue"], "size": "M", "tags": ["b"]}
    assert "1 red / 2 green / 3 blue; several, with commas" in prompts[0]
    assert "colors needs an answer (it is required)" in shown
    assert "colors needs one of red, green, blue" in shown  # "4" is no choice
    assert "1 Apples / 2 Pears; several, with commas, optional" in prompts[-1]


async def test_too_few_choices_are_asked_again_and_an_optional_one_may_be_left_out() -> None:
    schema = {"type": "object", "properties": {
        "pick": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"enum": ["x", "y", "z"]}},
        "more": {"type": "array", "items": {"enum": ["p"]}}}}
    answer, prompts, shown = await _answer(["1", "1,2,3", "x, z", ""], schema)
    assert orjson.loads(str(answer["content"])) == {"pick": ["x", "z"]}
    assert "at least 2 of x, y, z" in shown and "at most 2 of x, y, z" in shown
    assert "several, with commas, at least 2" in prompts[0]


async def test_a_question_without_fields_is_accepted_only_by_a_yes() -> None:
    empty = {"type": "object", "properties": {}}
    for lines, expected in ((["y"], {"content": "{}"}), (["yes"], {"content": "{}"}), ([""], {"approved": False}),
                            (["n"], {"approved": False}), ([], {"approved": False})):
        answer, prompts, shown = await _answer(lines, empty)
        assert answer == expected, lines
        assert len(prompts) == 1 and "accept?" in prompts[0]
        assert ("✓ accepted" if "content" in expected else "✗ declined") in shown


SIGNUP = {"type": "object", "required": ["age"], "properties": {
    "age": {"type": "integer", "title": "Integer", "minimum": 1, "maximum": 100},
    "email": {"type": "string", "format": "email"},
    "code": {"type": "string", "minLength": 2, "maxLength": 3}}}


async def test_a_value_outside_the_fields_schema_is_asked_again_with_the_reason() -> None:
    answer, prompts, shown = await _answer(["500", "0", "7", "nope", "ann@example.com", "abcd", "x", "ab"], SIGNUP)
    assert orjson.loads(str(answer["content"])) == {"age": 7, "email": "ann@example.com", "code": "ab"}
    assert [p.split("[/]")[0].removeprefix("[bold yellow]").strip() for p in prompts] == [
        "Integer", "Integer", "Integer", "email", "email", "code", "code", "code"]
    assert "Integer: 500 is greater than the maximum of 100" in shown
    assert "Integer: 0 is less than the minimum of 1" in shown
    assert "email: 'nope' is not a 'email'" in shown
    assert "code: 'abcd' is too long" in shown and "code: 'x' is too short" in shown
    assert shown.index("Integer: 500") < shown.index("✓ answered")


async def test_an_answer_the_whole_schema_refuses_asks_the_field_it_names_again_not_sent() -> None:
    """Each field fits alone; together they break an ``if``/``then`` (a submission would be
    refused): the field named is asked again, and the answer sent only once it fits."""
    schema = {"type": "object", "properties": {"country": {"type": "string"}, "postcode": {"type": "string"}},
              "if": {"properties": {"country": {"const": "UK"}}},
              "then": {"properties": {"postcode": {"minLength": 5}}}}
    answer, prompts, shown = await _answer(["UK", "L1", "L1 8JQ"], schema)
    assert orjson.loads(str(answer["content"])) == {"country": "UK", "postcode": "L1 8JQ"}
    assert len(prompts) == 3 and "postcode" in prompts[2]
    assert "not taken, postcode: 'L1' is too short" in shown
    assert shown.index("not taken") < shown.index("✓ answered")


async def test_a_refusal_that_names_no_field_asks_every_field_again_and_decline_still_ends_it() -> None:
    schema = {"type": "object", "minProperties": 1, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    answer, prompts, shown = await _answer(["", "", "", "x"], schema)
    assert orjson.loads(str(answer["content"])) == {"b": "x"}
    assert len(prompts) == 4 and "not taken, {} should be non-empty" in shown
    answer, prompts, shown = await _answer(["", "", "/decline"], schema)
    assert answer == {"approved": False} and "✗ declined" in shown and "✓ answered" not in shown


async def test_an_answer_the_turn_refuses_is_asked_again() -> None:
    """The local chat's last word is the turn's own check: a refused answer is asked again."""
    import io

    from rich.console import Console

    from turnstream.chat.ui import ChatUI, LineReader
    from turnstream.errors import InvalidValue
    from turnstream.events import ToolRequest

    lines = iter(["7", "8"])
    submitted: list[dict[str, object]] = []

    class Agent:
        async def submit(self, turn_id: str, tool_use_id: str, **kw: object) -> bool:
            submitted.append(kw)
            if len(submitted) == 1:
                raise InvalidValue("content.n", "7 is not allowed here")
            return True

    out = io.StringIO()
    ui = ChatUI(Console(file=out, width=200), LineReader(io.StringIO("")))

    async def ask(prompt: str) -> str | None:
        return next(lines)

    ui.ask = ask  # type: ignore[method-assign]
    req = ToolRequest(tool_use_id="t1", tool_name="pick", executor="server", turn_id="turn_1",
                      elicitation={"message": "Pick one", "requested_schema": {
                          "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
    await ui._answer(Agent(), [req])  # type: ignore[arg-type]
    assert [kw["content"] for kw in submitted] == ['{"n":7}', '{"n":8}']
    assert "7 is not allowed here" in out.getvalue()
