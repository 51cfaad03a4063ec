"""The scenario engine's replies (chosen by the request, as a model would choose) and the two
built-in demos that use them: every suggestion the web page offers, and the terminal chat's
offline demo, do what they say."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstream import Agent, tool
from turnstream.blocks import TextBlock, ToolResultBlock, ToolUseBlock, Turn
from turnstream.scenarios.engine import RequestView, Scenario
from turnstream.toolsets import calculator_tool, make_file_tools


def view(text: str, *tools: str, rounds: int = 0, results: list[str] | None = None) -> RequestView:
    return RequestView(user_texts=1, rounds=rounds, results=results or [], last_input=text, tool_names=list(tools))


def first_block(s: Scenario, v: RequestView) -> tuple[str, str]:
    b = s.script(v).blocks[0]
    return b.type, b.arguments if b.type == "tool_use" else b.text


REPLIES = Scenario({
    "steps": [{"blocks": [{"type": "text", "text": "plain steps"}]}],
    "replies": [
        {"when": {"input": r"(?i)read (?P<path>\S+)", "tools": ["read_file"]},
         "steps": [{"blocks": [{"type": "tool_use", "name": "read_file", "input": {"path": "{{match.path}}"}}]},
                   {"blocks": [{"type": "text", "text": "read {{match.path}}: {{last}}"}]}]},
        {"when": {"tools": ["ask"]}, "steps": [{"blocks": [{"type": "text", "text": "asking"}]}]},
        {"when": {"input": "^echo-demo$"}, "scenario": "echo"},
    ]})


def test_the_first_reply_that_fits_plays_and_its_groups_fill_templates() -> None:
    assert first_block(REPLIES, view("please read notes.txt", "read_file")) == ("tool_use", '{"path": "notes.txt"}')
    final = REPLIES.script(view("please read notes.txt", "read_file", rounds=1, results=["milk"]))
    assert final.blocks[0].text == "read notes.txt: milk"
    assert first_block(REPLIES, view("please read notes.txt")) == ("text", "plain steps")  # no read_file offered
    assert first_block(REPLIES, view("anything", "ask", "read_file")) == ("text", "asking")
    assert first_block(REPLIES, view("echo-demo")) == ("text", "You said: echo-demo")  # another built-in
    assert first_block(REPLIES, view("nothing fits")) == ("text", "plain steps")


def test_a_reply_plays_only_built_in_scenarios_and_needs_something_to_play(tmp_path: Path) -> None:
    outside = tmp_path / "x.json"
    outside.write_text('{"steps": []}')
    for name in (str(outside), "../scenarios/echo", "nope"):
        with pytest.raises(KeyError):
            Scenario({"replies": [{"scenario": name}]}).script(view("hi"))
    with pytest.raises(ValueError, match="steps or a scenario"):
        Scenario({"replies": [{"when": {"input": "x"}}]})


WEB_TOOLS = ("get_notebook_state", "create_cell", "update_cell", "run_cell", "delete_cell", "calculator",
             "get_browser_time")
TERMINAL_TOOLS = ("list_directory", "read_file", "calculator")


def test_the_web_demo_does_what_each_suggestion_says() -> None:
    demo = Scenario.builtin("notebook-demo")
    build = demo.script(view("Create an example notebook with some data analysis", *WEB_TOOLS))
    assert [b.name for b in build.blocks if b.type == "tool_use"] == ["get_notebook_state"]
    clock = demo.script(view("What time is it in my browser?", *WEB_TOOLS))
    assert [b.name for b in clock.blocks if b.type == "tool_use"] == ["get_browser_time"]
    answer = demo.script(view("What time is it in my browser?", *WEB_TOOLS, rounds=1,
                              results=['{"local": "24/11/2026, 10:00:00 CET", "time_zone": "Europe/Paris"}']))
    assert answer.blocks[0].text == "Your browser says it is **24/11/2026, 10:00:00 CET** (time zone Europe/Paris)."
    other = demo.script(view("Write me a poem", *WEB_TOOLS))
    assert [b.type for b in other.blocks] == ["text"] and "offline demo" in other.blocks[0].text


def test_the_web_demo_fits_a_terminal_client() -> None:
    """A terminal chat on a demo server offers its own tools (toolset none): the demo uses them."""
    demo = Scenario.builtin("notebook-demo")
    for text in ("what is here?", "Create an example notebook with some data analysis"):
        script = demo.script(view(text, *TERMINAL_TOOLS))
        names = [b.name for b in script.blocks if b.type == "tool_use"]
        assert names and set(names) <= set(TERMINAL_TOOLS)
    assert first_block(demo, view("read setup.py", *TERMINAL_TOOLS)) == ("text", "Reading `setup.py`.")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "project"
    r.mkdir()
    (r / "notes.txt").write_text("remember the milk\n")
    (r / "src").mkdir()
    (r / "src" / "main.py").write_text("print('hi')\n")
    return r


async def chat_turn(root: Path, message: str) -> Turn:
    agent = Agent("scripted:chat-demo", tools=[*make_file_tools(root), calculator_tool])
    try:
        return await agent.run(message)
    finally:
        await agent.aclose()


def calls_and_results(turn: Turn) -> list[tuple[str, str, bool]]:
    calls = {b.tool_use_id: b for b in turn.blocks if isinstance(b, ToolUseBlock)}
    return [(calls[b.tool_use_id].name, b.content, b.is_error) for b in turn.blocks
            if isinstance(b, ToolResultBlock)]


def answer(turn: Turn) -> str:
    return [b for b in turn.blocks if isinstance(b, TextBlock)][-1].text


async def test_the_chat_demo_tours_the_real_tools(root: Path) -> None:
    turn = await chat_turn(root, "hello, what can you do?")
    assert turn.status == "complete"
    (ls, listing, e1), (calc, value, e2) = calls_and_results(turn)
    assert (ls, calc, e1, e2) == ("list_directory", "calculator", False, False)
    assert "notes.txt" in listing and "src/" in listing
    assert value == "126"
    assert "read <file>" in answer(turn)


async def test_the_chat_demo_reads_lists_and_calculates_what_it_is_asked(root: Path) -> None:
    read = await chat_turn(root, "read notes.txt")
    assert calls_and_results(read) == [("read_file", "remember the milk\n", False)]
    outside = await chat_turn(root, "show ../secret.txt")
    [(name, refusal, is_error)] = calls_and_results(outside)
    assert name == "read_file" and is_error and refusal.startswith("PathOutsideRootError")
    listed = await chat_turn(root, "list src")
    assert calls_and_results(listed)[0][1].splitlines()[1].startswith("main.py")
    calc = await chat_turn(root, "what is 6*7?")
    assert calls_and_results(calc) == [("calculator", "42", False)]
    assert answer(calc) == "`6*7` → 42"


@pytest.mark.parametrize(("message", "expression", "value"), [
    ("17*23+sqrt(16)", "17*23+sqrt(16)", "395"),
    ("What is sqrt(16) + 1?", "sqrt(16) + 1", "5"),
    ("2**10 / 4 - log10(1000)", "2**10 / 4 - log10(1000)", "253"),
    ("and sqrt(81)?", "sqrt(81)", "9"),
])
async def test_the_chat_demo_hands_the_calculator_the_whole_expression(root: Path, message: str, expression: str,
                                                                       value: str) -> None:
    turn = await chat_turn(root, message)
    calls = [b for b in turn.blocks if isinstance(b, ToolUseBlock)]
    assert [c.input for c in calls] == [{"expression": expression}]
    [(name, result, is_error)] = calls_and_results(turn)
    assert (name, is_error) == ("calculator", False)
    assert float(result) == float(value)
    assert answer(turn) == f"`{expression}` → {result}"


async def test_the_chat_demo_does_not_take_words_with_numbers_for_arithmetic(root: Path) -> None:
    turn = await chat_turn(root, "it is 3 apples - 2 pears, and year 2023")
    assert [name for name, _, _ in calls_and_results(turn)] == ["list_directory", "calculator"]  # the tour
    assert "read <file>" in answer(turn)


async def test_the_chat_demo_without_its_tools_says_so() -> None:
    @tool
    def other() -> str:
        """Something else."""
        return ""

    agent = Agent("scripted:chat-demo", tools=[other])
    try:
        turn = await agent.run("read notes.txt")
    finally:
        await agent.aclose()
    assert "none of the tools I know" in answer(turn)
