"""``turnstream replay SESSION_ID`` and ``turnstream users add NAME`` as a user runs them: a
subprocess on a SQLite file (SPEC §6, §9)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tests.support.mock_provider import MockHandle
from turnstream import Agent, tool
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.settings import SETTINGS, Settings
from turnstream.store import open_store


def turnstream(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # Rich wraps at 80 columns when not on a terminal
    env.pop("TURNSTREAM_DB", None)
    return subprocess.run([sys.executable, "-m", "turnstream.cli", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@tool
def lookup(city: str) -> str:
    """Look up a city."""
    return f"{city}: 21 degrees"


async def test_replay_prints_every_block_in_order(tmp_path: Path, mock_provider: MockHandle,
                                                  scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"turns": [
        [{"blocks": [{"type": "thinking", "thinking": "The user wants Paris.", "signature": "sig-1"},
                     {"type": "text", "text": "Checking Paris."},
                     {"type": "tool_use", "name": "lookup", "input": {"city": "Paris"}}]},
         {"blocks": [{"type": "text", "text": "It is {{last}} in Paris."}]}],
        [{"blocks": [{"type": "text", "text": "Second answer."}]}]]})
    db = f"sqlite:///{tmp_path / 'replay.db'}"
    store = open_store(db)
    provider = AnthropicProvider(model, api_key="test-key", base_url=mock_provider.base_url)
    agent = Agent(provider, tools=[lookup], store=store, session_id="ses-replay")
    try:
        first = await agent.run("Weather in Paris?")
        second = await agent.run("And tomorrow?")
    finally:
        await agent.aclose()
    assert first.status == second.status == "complete"

    out = turnstream("replay", "ses-replay", "--db", db)
    assert out.returncode == 0, out.stderr
    expected = [
        "user: Weather in Paris?",
        "#0 step 1 thinking: The user wants Paris.",
        "#1 step 1 Checking Paris.",
        '#2 step 1 → lookup {"city": "Paris"}',
        "#3 step 1 ← Paris: 21 degrees",
        "#4 step 2 It is Paris: 21 degrees in Paris.",
        "complete · end_turn · 2 step(s)",
        "user: And tomorrow?",
        "#0 step 1 Second answer.",
        "complete · end_turn · 1 step(s)",
    ]
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    at = 0
    for want in expected:  # each in order, after the one before
        found = next((i for i in range(at, len(lines)) if lines[i].startswith(want)), None)
        assert found is not None, f"{want!r} not found after line {at} in:\n{out.stdout}"
        at = found + 1
    # Nothing but the header, the two users' lines, the blocks and the two summaries.
    assert len(lines) == 1 + len(expected)

    missing = turnstream("replay", "ses-nope", "--db", db)
    assert missing.returncode == 1 and "no session ses-nope" in missing.stdout


async def test_users_add_prints_a_key_that_works_and_is_not_stored(tmp_path: Path) -> None:
    db_file = tmp_path / "users.db"
    db = f"sqlite:///{db_file}"
    out = turnstream("users", "add", "alice", "--db", db)
    assert out.returncode == 0, out.stderr
    [key] = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith("API key")]
    assert len(key) >= 20

    store = open_store(db)
    await store.open()
    try:
        user = await store.user_by_key(key)
        assert user is not None and user.name == "alice"
        assert await store.user_by_key(key + "x") is None
    finally:
        await store.aclose()

    files = sorted(tmp_path.glob("users.db*"))  # the database, and its WAL and shared memory if left
    assert db_file in files
    contents = {f.name: f.read_bytes() for f in files}
    assert any(b"alice" in data for data in contents.values())  # the user itself is stored
    for name, data in contents.items():
        assert key.encode() not in data, f"the API key is stored in clear in {name}"


def test_users_add_refuses_a_name_that_is_taken(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'users.db'}"
    assert turnstream("users", "add", "alice", "--db", db).returncode == 0
    again = turnstream("users", "add", "alice", "--db", db)
    assert again.returncode == 1
    assert again.stderr.strip() == "turnstream users add: a user named 'alice' exists already"
    assert "API key" not in again.stdout


def test_replay_without_a_database_creates_none(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("TURNSTREAM_DB", None)
    out = subprocess.run([sys.executable, "-m", "turnstream.cli", "replay", "ses_x"], capture_output=True,
                         text=True, env=env, timeout=60, cwd=tmp_path)
    assert out.returncode == 1
    assert "there is no database at ./turnstream.db" in out.stderr
    assert list(tmp_path.iterdir()) == []
    named = turnstream("replay", "ses_x", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert named.returncode == 1 and "none.db" in named.stderr
    assert list(tmp_path.iterdir()) == []


def test_help_of_replay_and_users_add_describes_their_arguments() -> None:
    replay = turnstream("replay", "--help").stdout
    assert "SESSION_ID  the session's id" in replay
    assert "Only reads." in replay
    assert "examples:\n  turnstream replay ses_" in replay
    add = turnstream("users", "add", "--help").stdout
    assert "NAME        a name for the user, unique in the database" in add
    assert "A name that another user has is refused." in add
    assert "$TURNSTREAM_DB" in add


def test_version_prints_the_installed_version() -> None:
    out = turnstream("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"turnstream {metadata.version('turnstream')}"


def _help(command: str, **env: str) -> str:
    full = {**os.environ, "COLUMNS": "200", **env}
    out = subprocess.run([sys.executable, "-m", "turnstream.cli", command, "--help"], capture_output=True, text=True,
                         env=full, timeout=60)
    assert out.returncode == 0, out.stderr
    return " ".join(out.stdout.split())  # argparse wraps long help; the words are what count


def test_help_of_serve_and_chat_gives_each_flag_its_description_variable_and_default() -> None:
    serve, chat = _help("serve"), _help("chat")
    assert "--port PORT the port to listen on (0 picks a free one) ($TURNSTREAM_PORT; now: 8000)" in serve
    assert "--db DB the database: sqlite:///path, postgresql://… or memory:// ($TURNSTREAM_DB; now: " \
           "sqlite:///./turnstream.db)" in serve
    assert "--root ROOT the folder the chat's file tools may read ($TURNSTREAM_ROOT; now: .)" in chat
    assert "--session SESSION resume this conversation (its id)" in chat
    defaults = Settings()
    for command, text in (("serve", serve), ("chat", chat)):
        flags = [s for s in SETTINGS if s.flag is not None and command in s.commands]
        assert flags, command
        for s in flags:  # every flag the settings table gives this command, described in full
            value = getattr(defaults, s.name)
            now = "none" if value in (None, "") else str(value)
            want = f"{s.flag} {s.name.upper()} {' '.join(s.help.split())} (${s.env}; now: {now})"
            assert want in text, (command, want)
    # The default shown is the one in force: the environment's value when it sets one.
    assert "($TURNSTREAM_PORT; now: 9123)" in _help("serve", TURNSTREAM_PORT="9123")


async def test_replay_shows_the_branch_shown_then_the_other_versions(tmp_path: Path, mock_provider: MockHandle,
                                                                     scenario_name: str) -> None:
    model = mock_provider.scenario(scenario_name, {"steps": [{"blocks": [{"type": "text", "text": "{{input}}!"}]}]})
    db = f"sqlite:///{tmp_path / 'branches.db'}"
    provider = AnthropicProvider(model, api_key="test-key", base_url=mock_provider.base_url)
    agent = Agent(provider, store=open_store(db), session_id="ses-branches")
    try:
        first = await agent.run("one")
        await agent.run("two")
        edited = await agent.run("two, edited", parent_turn_id=first.id)  # the branch shown now
    finally:
        await agent.aclose()
    assert edited.status == "complete"
    out = turnstream("replay", "ses-branches", "--db", db)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.index("user: one (#1)") < text.index("user: two, edited (#3)") < text.index("Other branches")
    assert text.index("Other branches") < text.index("user: two (#2, after #1)")
