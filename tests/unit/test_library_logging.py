"""The library keeps quiet unless the program configures logging (issue 16, point 15): a tool
that refuses its input is an answer for the model, not a traceback on the user's terminal."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from turnstream.blocks import ToolUseBlock
from turnstream.errors import PathOutsideRootError
from turnstream.tools.executor import ToolExecutor
from turnstream.tools.tool import tool


@tool
def refuse(path: str) -> str:
    """Refuse every path."""
    raise PathOutsideRootError(f"'{path}' is outside the allowed directory")


@tool
def missing(path: str) -> str:
    """A file that is not there."""
    raise FileNotFoundError(f"'{path}' does not exist")


@tool
def buggy(path: str) -> str:
    """A tool with a bug."""
    raise RuntimeError("boom")


async def test_expected_refusals_log_one_line_and_bugs_their_traceback(caplog: pytest.LogCaptureFixture) -> None:
    ex = ToolExecutor({t.name: t for t in (refuse, missing, buggy)})
    calls = [ToolUseBlock(tool_use_id=f"c{i}", name=n, input={"path": "../x"})
             for i, n in enumerate(("refuse", "missing", "buggy"))]
    outcomes = [await ex.decide(c) for c in calls]
    with caplog.at_level(logging.DEBUG, logger="turnstream.tools"):
        await ex.run(outcomes, session_id="s", turn_id="t")
    assert [o.content for o in outcomes] == [
        "PathOutsideRootError: '../x' is outside the allowed directory",
        "FileNotFoundError: '../x' does not exist", "RuntimeError: boom"]
    assert all(o.is_error for o in outcomes)
    by_tool = {r.getMessage().split()[1]: r for r in caplog.records}
    assert by_tool["refuse"].levelno == logging.INFO and by_tool["refuse"].exc_info is None
    assert by_tool["missing"].levelno == logging.INFO and by_tool["missing"].exc_info is None
    assert by_tool["buggy"].levelno == logging.ERROR and by_tool["buggy"].exc_info is not None


SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    from turnstream import Agent, tool
    from turnstream.toolsets import make_file_tools

    @tool
    def buggy(x: int) -> int:
        \"\"\"Always fails.\"\"\"
        raise RuntimeError("a bug in the tool")

    async def main() -> None:
        root = Path(sys.argv[2])
        agent = Agent("scripted:" + sys.argv[1], tools=[*make_file_tools(root), buggy])
        turn = await agent.run("go")
        print(json.dumps([b.content for b in turn.blocks if b.type == "tool_result"]))

    asyncio.run(main())
""")


def test_a_program_that_configures_no_logging_gets_no_tracebacks(tmp_path: Path) -> None:
    scenario = tmp_path / "refusals.json"
    scenario.write_text("""{"steps": [
        {"blocks": [{"type": "tool_use", "name": "read_file", "input": {"path": "../../etc/passwd"}},
                    {"type": "tool_use", "name": "read_file", "input": {"path": "nothing-here.txt"}},
                    {"type": "tool_use", "name": "buggy", "input": {"x": 1}}]},
        {"blocks": [{"type": "text", "text": "ok"}]}]}""")
    root = tmp_path / "root"
    root.mkdir()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(scenario), str(root)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "PathOutsideRootError" in proc.stdout and "RuntimeError: a bug in the tool" in proc.stdout
    assert proc.stderr == ""
