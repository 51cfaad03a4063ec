"""Browser tests of versions in the web chat (issue 28, docs/branches.md): edit a message, regenerate
an answer, switch with "‹ 2/3 ›", across a reload and a second tab, from the keyboard and on a
phone. The scenarios are in ``branches.test.mjs``; each runs against its own demo server, as in
``test_web.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.web.test_web import HERE, _ensure_tools, _run
from tests.support.server import Server, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _ensure_tools()
    srv = start_server(tmp_path_factory.mktemp("web-branches"),
                       env={"TURNSTREAM_SCENARIO_DIR": str(HERE / "scenarios")})
    yield srv
    srv.stop()


def test_edit_sends_a_new_version_and_the_old_stays_reachable(server: Server) -> None:
    _run(server, "editing an earlier message sends a new version", "branches.test.mjs")


def test_regenerate_makes_a_sibling_answer(server: Server) -> None:
    _run(server, "Regenerate asks for a sibling answer", "branches.test.mjs")


def test_the_version_shown_survives_a_reload_and_reaches_a_second_tab(server: Server) -> None:
    _run(server, "the version shown survives a reload", "branches.test.mjs")


def test_branch_controls_from_the_keyboard(server: Server) -> None:
    _run(server, "the pencil, Regenerate and ‹ › work from the keyboard", "branches.test.mjs")


def test_a_switch_keeps_the_focus_when_its_live_echo_comes_first(server: Server) -> None:
    _run(server, "a switch keeps the focus on ‹ › when the live word of it comes", "branches.test.mjs")


def test_branch_controls_on_a_phone(server: Server) -> None:
    _run(server, "on a phone, the branch controls are thumb-sized", "branches.test.mjs")
