"""Scenarios that branch on what the tools said (``then`` / ``when``), and the data files
``notebook.files`` checks without a library."""

from __future__ import annotations

import json

import pytest

from turnstream.notebook import files
from turnstream.scenarios.engine import RequestView, Scenario

BRANCHING = {"name": "b", "steps": [{"blocks": [{"type": "tool_use", "name": "look", "input": {}}]}],
             "then": [{"when": "{{results[0].files[0].name}}",
                       "steps": [{"blocks": [{"type": "text", "text": "file {{results[0].files[0].name}}"}]}]},
                      {"steps": [{"blocks": [{"type": "text", "text": "no file"}]}]}]}


def view(rounds: int, results: list[str]) -> RequestView:
    return RequestView(user_texts=1, rounds=rounds, results=results, last_input="hi")


@pytest.mark.parametrize(("result", "said"), [
    ({"files": [{"name": "a.csv"}]}, "file a.csv"), ({"files": []}, "no file"), ({}, "no file"),
    ({"files": [{"name": ""}]}, "no file")])
def test_a_turn_follows_the_branch_its_tool_result_picks(result: dict[str, object], said: str) -> None:
    s = Scenario(BRANCHING)
    assert s.script(view(0, [])).blocks[0].name == "look"  # before any result: the shared first step
    assert s.script(view(1, [json.dumps(result)])).blocks[0].text == said


def test_branches_work_inside_turns_and_the_last_step_repeats() -> None:
    s = Scenario({"turns": [BRANCHING]})
    got = s.script(view(5, [json.dumps({"files": [{"name": "x.json"}]})]))
    assert got.blocks[0].text == "file x.json"


@pytest.mark.parametrize(("name", "variable"), [("sales.csv", "sales"), ("sales-2024.v2.tsv", "sales_2024_v2"),
                                                ("2024.json", "df_2024"), ("class.xlsx", "class_"),
                                                ("Q1 report.csv", "Q1_report"), ("a b/c.csv", None),
                                                ("tab\there.csv", None), (" lead.csv", None)])
def test_file_names_and_their_variables(name: str, variable: str | None) -> None:
    if variable is None:
        with pytest.raises(ValueError, match="not a usable file name"):
            files.check_name(name)
    else:
        files.check_name(name)
        assert files.variable(name) == variable
