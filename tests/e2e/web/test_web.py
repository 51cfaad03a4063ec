"""Browser tests of the web chat: a real ``turnstream serve`` (SQLite in a temporary folder,
no model configured, so the offline demo) driven by Debian's Chromium through the npm
package playwright-core. The scenarios live in ``web.test.mjs``; each pytest test runs one
of them with ``node --test --test-name-pattern``.

Needs ``node`` (v20+), ``npm ci`` in this folder and ``/usr/bin/chromium``
(``scripts/ensure-chromium.sh``); when those are missing the fixture installs them.
Screenshots go to ``tests/e2e/screenshots/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import Server, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SCREENSHOTS = ROOT / "tests" / "e2e" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))


def _ensure_tools() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not installed; the web tests need Node.js 20+ (build-time only)")
    if not (HERE / "node_modules" / "playwright-core").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is not installed; run `npm ci` in tests/e2e/web")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=300)
    if not CHROMIUM.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure-chromium.sh")], check=True, timeout=900)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``turnstream serve`` with no model and no API key: the offline demo. Sessions may also name
    the tests' own scripted models in ``scenarios/``."""
    _ensure_tools()
    srv = start_server(tmp_path_factory.mktemp("web"), env={"TURNSTREAM_SCENARIO_DIR": str(HERE / "scenarios")})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def server_without_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``turnstream serve`` with no ``bwrap`` on its PATH: no notebook cell can run."""
    _ensure_tools()
    empty = tmp_path_factory.mktemp("no-bwrap")
    srv = start_server(tmp_path_factory.mktemp("web-no-sandbox"), env={"PATH": str(empty)})
    yield srv
    srv.stop()


def _run(server: Server, name: str, file: str = "web.test.mjs") -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TURNSTREAM_URL": server.url.rstrip("/"),
           "TURNSTREAM_KEY": server.key or "", "SCREENSHOT_DIR": str(SCREENSHOTS), "CHROMIUM": str(CHROMIUM)}
    proc = subprocess.run(
        ["node", "--test", "--test-reporter=spec", f"--test-name-pattern={re.escape(name)}", file],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 or "# pass 0" in out or "ℹ pass 0" in out:
        log = "\n".join(server.log_text().splitlines()[-80:])
        pytest.fail(f"browser test {name!r} failed (exit {proc.returncode}):\n{out}\n"
                    f"--- server log ---\n{log}")


def test_key_from_fragment_and_demo_notice(server: Server) -> None:
    _run(server, "the page takes the key from the address")


def test_login_prompt_without_key(server: Server) -> None:
    _run(server, "without a key the page asks for one")


def test_demo_conversation_inline_tools_table_and_chart(server: Server) -> None:
    _run(server, "demo conversation")


def test_approve_delete_cell(server: Server) -> None:
    _run(server, "approving delete_cell")


def test_deny_delete_cell(server: Server) -> None:
    _run(server, "denying delete_cell")


def test_client_side_tool(server: Server) -> None:
    _run(server, "a client-side tool")


def test_reload_mid_turn_resumes(server: Server) -> None:
    _run(server, "reloading the page mid-turn")


def test_dropped_connection_resumes(server: Server) -> None:
    _run(server, "a dropped connection is resumed")


def test_step_restart_drops_partial_blocks(server: Server) -> None:
    _run(server, "a stream that breaks mid-step")


def test_provider_error_in_place(server: Server) -> None:
    _run(server, "a provider error shows in place")


def test_stop_button_cancels(server: Server) -> None:
    _run(server, "the stop button cancels")


def test_second_tab_sees_notebook_live(server: Server) -> None:
    _run(server, "a second tab sees the notebook")


def test_sessions_keyboard(server: Server) -> None:
    _run(server, "sessions can be created")


def test_notebook_says_why_no_cell_runs_without_a_sandbox(server_without_sandbox: Server) -> None:
    _run(server_without_sandbox, "the notebook pane says why no cell can run")


# Issue 16, "the first hour" (first-hour.test.mjs) ------------------------------------------------

def test_tool_calls_are_one_line_and_open_formatted(server: Server) -> None:
    _run(server, "tool calls are one line each", "first-hour.test.mjs")


def test_long_output_folds_errors_are_text_code_is_highlighted(server: Server) -> None:
    _run(server, "long output folds", "first-hour.test.mjs")


def test_every_suggestion_works_offline(server: Server) -> None:
    _run(server, "every suggestion the page offers", "first-hour.test.mjs")


def test_chats_are_titled_and_never_left_empty(server: Server) -> None:
    _run(server, "a chat takes its first message as its title", "first-hour.test.mjs")


@pytest.mark.parametrize("device", ["tablet", "phone"])
def test_small_screens_have_tabs_and_a_drawer(server: Server, device: str) -> None:
    _run(server, f"on a {device} (", "first-hour.test.mjs")


def test_every_size_light_and_dark_axe_and_chart_theme(server: Server) -> None:
    _run(server, "every size in light and dark", "first-hour.test.mjs")


def test_provider_error_in_words_with_retry(server: Server) -> None:
    _run(server, "a provider error says what happened", "first-hour.test.mjs")


def test_delete_asks_in_the_pages_dialog(server: Server) -> None:
    _run(server, "deleting a chat asks in the page's dialog", "first-hour.test.mjs")
