"""Browser tests of the web chat: a real ``turnstream serve`` (SQLite in a temporary folder,
no model configured, so the offline demo) driven by Debian's Chromium through the npm
package playwright-core. The scenarios live in ``web.test.mjs``; each pytest test runs one
of them with ``node --test --test-name-pattern``.

Needs ``node`` (v20+), ``npm ci`` in this folder, ``/usr/bin/chromium``
(``scripts/ensure-chromium.sh``) and the page's CodeMirror bundle (``make web-assets``); when
those are missing the fixture installs them.
Screenshots go to ``tests/e2e/screenshots/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import nbclient
import nbformat
import pytest

from tests.support.server import Server, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SCREENSHOTS = ROOT / "tests" / "e2e" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
EDITOR_BUNDLE = ROOT / "turnstream" / "server" / "static" / "vendor" / "codemirror" / "editor.min.js"


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
    if not EDITOR_BUNDLE.exists():  # without it cells edit in plain text boxes, which tests of CodeMirror miss
        subprocess.run(["make", "web-assets"], cwd=ROOT, check=True, timeout=300)
        if not EDITOR_BUNDLE.exists():
            pytest.fail(f"{EDITOR_BUNDLE.relative_to(ROOT)} is missing and `make web-assets` could not build it")


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


@pytest.fixture(scope="module")
def gated_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo server with the tests' ``wait_for_gate`` tool: a turn waits in it until the test
    writes to the FIFO ``TURNSTREAM_TEST_GATE`` names; and ``snapshot``, which returns an image."""
    _ensure_tools()
    tmp = tmp_path_factory.mktemp("web-gate")
    gate = tmp / "gate"
    os.mkfifo(gate)
    srv = start_server(tmp, env={"TURNSTREAM_TOOLS": "tests.support.protocol_tools:WEB_TOOLS",
                                 "PYTHONPATH": str(ROOT), "TURNSTREAM_TEST_GATE": str(gate),
                                 "TURNSTREAM_SCENARIO_DIR": str(HERE / "scenarios")})
    srv.gate = gate  # type: ignore[attr-defined]
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def budget_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``turnstream serve`` with a 300-token turn budget and a price for the budget scenario's model."""
    _ensure_tools()
    folder = tmp_path_factory.mktemp("web-budget")
    prices = folder / "prices.json"
    prices.write_text('{"scripted:e2e-budget": {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1.25}}')
    srv = start_server(folder, env={"TURNSTREAM_SCENARIO_DIR": str(HERE / "scenarios"),
                                    "TURNSTREAM_BUDGET_TURN_TOKENS": "300", "TURNSTREAM_PRICES": str(prices)})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo server with ``--mcp-config`` naming the tests' MCP server over stdio as ``t``,
    and as ``o`` speaking only the protocol versions before 2026-07-28 (which carry sampling)."""
    _ensure_tools()
    tmp = tmp_path_factory.mktemp("web-mcp")
    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "t": {"command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio"], "cwd": str(ROOT),
              "timeout": 20},
        "o": {"command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio-2025"],
              "cwd": str(ROOT), "timeout": 20}}}))
    srv = start_server(tmp, env={"TURNSTREAM_MCP_CONFIG": str(config),
                                 "TURNSTREAM_SCENARIO_DIR": str(HERE / "scenarios")})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def mcp_servers_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo server with the tests' MCP server (``t``) and one that dies at start (``dead``)."""
    _ensure_tools()
    tmp = tmp_path_factory.mktemp("web-mcp-servers")
    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "t": {"command": sys.executable, "args": ["-m", "tests.support.mcp_server", "stdio"], "cwd": str(ROOT),
              "timeout": 20},
        "dead": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no key')"]}}}))
    srv = start_server(tmp, env={"TURNSTREAM_MCP_CONFIG": str(config),
                                 "TURNSTREAM_SCENARIO_DIR": str(HERE / "scenarios")})
    yield srv
    srv.stop()


def _run(server: Server, name: str, file: str = "web.test.mjs", env: dict[str, str] | None = None) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TURNSTREAM_URL": server.url.rstrip("/"),
           "TURNSTREAM_KEY": server.key or "", "SCREENSHOT_DIR": str(SCREENSHOTS), "CHROMIUM": str(CHROMIUM),
           "TURNSTREAM_TEST_GATE": str(getattr(server, "gate", "")), **(env or {})}
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


def test_always_allow_a_tool_in_the_session(server: Server) -> None:
    _run(server, "always allowing a tool in a session")


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


def test_budget_pause_and_usage_footer(budget_server: Server) -> None:
    _run(budget_server, "a turn at its budget asks to continue")


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


def test_pasted_and_dropped_attachments_are_sent_and_shown(server: Server) -> None:
    _run(server, "a pasted image and a dropped PDF", "messages.test.mjs")


def test_a_message_while_the_turn_runs_is_queued_then_delivered(gated_server: Server) -> None:
    _run(gated_server, "a message sent while the turn runs", "messages.test.mjs")


def test_a_message_while_approval_waits_denies_it(server: Server) -> None:
    _run(server, "a message sent while a call waits for approval", "messages.test.mjs")


def test_agents_are_named_on_their_messages(server: Server) -> None:
    _run(server, "each assistant message names the agent", "agents.test.mjs")


# Issue 17, tools that need the user (questions.test.mjs) ------------------------------------------

def test_an_mcp_tool_runs_inline(mcp_server: Server) -> None:
    _run(mcp_server, "an MCP tool runs inline", "questions.test.mjs")


def test_an_mcp_question_is_a_form_answered_or_declined(mcp_server: Server) -> None:
    _run(mcp_server, "an MCP server's question is a form", "questions.test.mjs")


def test_an_mcp_servers_sampling_request_is_allowed_in_a_form(mcp_server: Server) -> None:
    _run(mcp_server, "an MCP server's request to use the model is allowed", "questions.test.mjs")


def test_a_denials_typed_reason_reaches_the_model(server: Server) -> None:
    _run(server, "a denial's typed reason reaches the model", "questions.test.mjs")


# Issue 15, the notebook people work in (notebook.test.mjs) ---------------------------------------

def test_notebook_cells_edit_run_add_move_delete(server: Server) -> None:
    _run(server, "cells: type and Shift+Enter", "notebook.test.mjs")


def test_notebook_edits_reach_the_assistant_and_other_tabs_with_conflicts_shown(server: Server) -> None:
    _run(server, "a user's edit reaches the assistant", "notebook.test.mjs")


def test_notebook_csv_from_the_chat_is_charted_and_the_ipynb_runs_in_jupyter(server: Server, tmp_path: Path) -> None:
    _run(server, "a CSV attached in the chat", "notebook.test.mjs", env={"DOWNLOAD_DIR": str(tmp_path)})
    # The page's download, as a user would open it in Jupyter: valid, and it runs without error
    # in a clean kernel with the same data file beside it.
    doc = nbformat.read(tmp_path / "notebook.ipynb", as_version=4)
    nbformat.validate(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jupyter_client's own, about its paths
        nbclient.NotebookClient(doc, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in doc.cells for o in cell.outputs]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs)


def test_notebook_csv_dropped_on_the_notebook_is_charted(server: Server) -> None:
    _run(server, "a CSV dropped on the notebook", "notebook.test.mjs")


def test_notebook_stop_during_run_cell_leaves_no_cell_running(server: Server) -> None:
    _run(server, "Stop while run_cell runs", "notebook.test.mjs")


def test_notebook_without_the_editor_bundle_uses_text_boxes(server: Server) -> None:
    _run(server, "without the editor bundle", "notebook.test.mjs")


def test_notebook_run_all_add_above_move_down_and_sql(server: Server) -> None:
    _run(server, "Run all runs every cell in order", "notebook.test.mjs")


def test_notebook_excel_and_parquet_dropped_on_the_chat(server: Server, tmp_path: Path) -> None:
    from tests.integration.server.test_notebook_formats import parquet, xlsx

    (tmp_path / "book.xlsx").write_bytes(xlsx())
    (tmp_path / "orders.parquet").write_bytes(parquet(tmp_path))
    _run(server, "Excel and Parquet files dropped on the chat", "notebook.test.mjs", env={"DATA_DIR": str(tmp_path)})


def test_notebook_chart_title_and_placeholder_fit_a_phone(server: Server) -> None:
    _run(server, "on a phone, a chart's long title wraps", "notebook.test.mjs")


def test_an_image_from_a_tool_is_shown(gated_server: Server) -> None:
    _run(gated_server, "an image a tool returns", "messages.test.mjs")


# Issue 26, a notebook that forgives (forgiving.test.mjs) ------------------------------------------
def test_notebook_restart_kernel_and_restart_and_run_all(server: Server) -> None:
    _run(server, "Restart kernel asks first", "forgiving.test.mjs")


def test_notebook_a_cell_waits_on_an_interrupted_loop(server: Server) -> None:
    _run(server, "a cell that uses an interrupted loop waits on it", "forgiving.test.mjs")


def test_notebook_a_cell_shows_it_waits_for_the_upstream_cell_that_runs(server: Server) -> None:
    _run(server, "a cell whose upstream cell runs first shows that it waits for it", "forgiving.test.mjs")


# Issue 24, admission that answers (busy.test.mjs) ---------------------------------------------------
def test_a_busy_server_is_retried_after_retry_after(server: Server) -> None:
    _run(server, "a 503 at capacity is retried", "busy.test.mjs")


def test_notebook_tab_never_enters_a_code_editor(server: Server) -> None:
    _run(server, "thirty Tabs from the message box", "forgiving.test.mjs")


def test_a_new_chat_is_ready_and_every_start_tops_the_sidebar(server: Server) -> None:
    _run(server, "a new chat is ready", "forgiving.test.mjs")


# Issue 27, MCP servers in the page (servers.test.mjs) ---------------------------------------------


def test_a_calls_progress_shows_on_its_tool_card(mcp_servers_server: Server) -> None:
    _run(mcp_servers_server, "a call's progress shows on its tool card", "servers.test.mjs")


def test_an_mcp_server_that_did_not_start_is_said_on_the_page(mcp_servers_server: Server) -> None:
    _run(mcp_servers_server, "an MCP server that did not start is said on the page", "servers.test.mjs")


def test_notebook_shift_enter_on_the_last_cell_and_a_refused_upload(server: Server) -> None:
    _run(server, "Shift+Enter on the last cell keeps what is typed next", "forgiving.test.mjs")


def test_notebook_chart_toolbar_never_covers_the_title_on_a_phone(server: Server) -> None:
    _run(server, "on a phone, a chart's toolbar never covers its title", "forgiving.test.mjs")


def test_escape_stops_a_turn_started_from_a_suggestion(server: Server) -> None:
    _run(server, "Escape stops a turn started from a suggestion", "forgiving.test.mjs")


def test_retry_shows_the_question_once(server: Server) -> None:
    _run(server, "Retry shows the question once", "forgiving.test.mjs")


def test_a_tool_calls_duration_survives_a_reload(server: Server) -> None:
    _run(server, "a tool call's duration after a reload", "forgiving.test.mjs")
