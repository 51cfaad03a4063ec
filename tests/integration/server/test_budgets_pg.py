"""Two ``turnstream serve`` processes on one PostgreSQL database share one user's daily
budget: runaway turns on both, at once, add every step to the one counter (none lost, none
twice) and all pause once it reaches the ceiling; a new turn on either then pauses at once."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.pg import fetch, run
from tests.support.server import Event, Server, new_session, run_turn, scenario, server_pair

pytestmark = pytest.mark.postgres

STEP_TOKENS = 20  # the scripted default: 10 in, 10 out
CEILING = 8 * STEP_TOKENS
"""Reached within 8 steps whatever the order the turns run in: a turn alone would reach it before
its 10th step (at the step limit, the limit's final answer comes first and the turn completes)."""
RUNAWAY = {"name": "runaway", "steps": [{"blocks": [{"type": "tool_use", "name": "spin", "input": {"n": "{{last}}"}}]}]}
"""Calls a tool the server does not have, again and again: each call gets an error result, and the loop goes on."""


@pytest.fixture
def pair(fresh_pg: str, tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    model = scenario(tmp_path / "runaway.json", RUNAWAY)
    with server_pair(tmp_path, fresh_pg, model, {"TURNSTREAM_BUDGET_USER_DAY_TOKENS": str(CEILING)}) as pair:
        yield pair


def one_turn(server: Server) -> list[Event]:
    with server.client() as c:
        sid = new_session(c, toolset="none")
        return run_turn(c, sid, "spin")


def test_two_processes_share_one_users_daily_budget(pair: tuple[Server, Server], fresh_pg: str) -> None:
    a, b = pair
    with ThreadPoolExecutor(8) as pool:
        turns = list(pool.map(one_turn, [a, b] * 4))
    spent = 0
    for events in turns:
        done = events[-1]
        assert done.event == "turn_complete" and done.data["status"] == "awaiting_client"
        (req,) = [e for e in events if e.event == "tool_request"]
        assert req.data["budget"]["scope"] == "user_day" and req.data["requires_approval"] is True
        assert req.data["budget"]["spent_tokens"] >= CEILING
        usage = done.data["usage"]
        spent += usage["input_tokens"] + usage["output_tokens"]
    ((counted,),) = run(fetch(fresh_pg, "SELECT tokens FROM budget_counters WHERE scope LIKE 'user:%'"))
    assert counted == spent  # every step of both processes counted, once
    assert CEILING <= counted < CEILING + len(turns) * STEP_TOKENS  # at most one step more per running turn
    later = one_turn(b)
    assert later[-1].data["status"] == "awaiting_client" and later[-1].data["steps"] == 1
