"""One settings object: read once from the environment, flags over it, one table for the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstream.cli import build_parser
from turnstream.errors import UsageError
from turnstream.settings import SETTINGS, DatabaseURL, Settings, markdown_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_defaults_when_nothing_is_set() -> None:
    s = Settings.from_env({})
    assert s.db == DatabaseURL.parse("sqlite:///./turnstream.db")
    assert (s.host, s.port, s.ping_interval, s.admit_max_lag, s.gc, s.loop) == ("127.0.0.1", 8000, 15.0, 0.01,
                                                                                "tuned", "uvloop")
    assert s.default_model("scripted:notebook-demo") == ("scripted:notebook-demo", True)


def test_every_variable_is_read() -> None:
    env = {"TURNSTREAM_DB": "memory://", "TURNSTREAM_MODEL": "openai:x", "TURNSTREAM_HOST": "0.0.0.0",
           "TURNSTREAM_PORT": "9000", "TURNSTREAM_ALLOWED_ORIGINS": "http://a.example/, http://b.example",
           "TURNSTREAM_PING_INTERVAL": "0.5", "TURNSTREAM_ADMIT_MAX_LAG_MS": "25", "TURNSTREAM_ADMIT_WAIT_S": "3",
           "TURNSTREAM_KEY_FILE": "/tmp/k.key", "TURNSTREAM_HEADER_TIMEOUT": "2.5",
           "TURNSTREAM_LOG_LEVEL": "DEBUG", "TURNSTREAM_LOG_FORMAT": "text", "TURNSTREAM_ACCESS_LOG": "on",
           "TURNSTREAM_GC": "default", "TURNSTREAM_LOOP": "asyncio", "TURNSTREAM_HOME": "/tmp/h",
           "TURNSTREAM_ROOT": "/srv", "TURNSTREAM_SERVER": "http://s", "TURNSTREAM_KEY": "ts_secret",
           "TURNSTREAM_SCENARIO_DIR": "/tmp", "TURNSTREAM_TAKEOVER": "interrupt", "TURNSTREAM_SHUTDOWN_GRACE": "5",
           "TURNSTREAM_NOTEBOOK_SANDBOX": "off", "TURNSTREAM_NOTEBOOK_NETWORK": "on", "TURNSTREAM_MAX_KERNELS": "4",
           "TURNSTREAM_KERNEL_IDLE_TIMEOUT": "off", "TURNSTREAM_KERNEL_MEMORY_MB": "1024",
           "TURNSTREAM_TOOLS": "my.tools:TOOLS", "TURNSTREAM_TITLE_MODEL": "openai:small",
           "TURNSTREAM_NOTEBOOK_FILE_MB": "8", "TURNSTREAM_NOTEBOOK_FILES_MB": "64",
           "TURNSTREAM_MCP_CONFIG": "/etc/mcp.json", "TURNSTREAM_MCP_SAMPLING": "deny",
           "TURNSTREAM_ATTACHMENT_MB": "0.5", "TURNSTREAM_MAX_ATTACHMENTS": "3",
           "TURNSTREAM_QUEUED_MESSAGES": "next_turn", "TURNSTREAM_AGENTS": "/etc/agents.json",
           "TURNSTREAM_AUDIT_REDACT": '["acct-[0-9]{8}", "pw=\\\\S+"]',
           "TURNSTREAM_BUDGET_TURN_TOKENS": "5000", "TURNSTREAM_BUDGET_TURN_USD": "$0.25",
           "TURNSTREAM_BUDGET_SESSION_TOKENS": "90000", "TURNSTREAM_BUDGET_SESSION_USD": "2",
           "TURNSTREAM_BUDGET_USER_DAY_TOKENS": "1000000", "TURNSTREAM_BUDGET_USER_DAY_USD": "10.5",
           "TURNSTREAM_BUDGET_WARN_AT": "0.9", "TURNSTREAM_BUDGET_ON_LIMIT": "answer",
           "TURNSTREAM_PRICES": "/etc/prices.json", "TURNSTREAM_CONTEXT_TOKENS": "16384",
           "TURNSTREAM_CONTEXT_FRACTION": "0.7"}
    assert {s.env for s in SETTINGS} == set(env)
    s = Settings.from_env(env)
    assert (s.attachment_mb, s.max_attachments, s.queued_messages) == (0.5, 3, "next_turn")
    assert s.db.kind == "memory" and s.model == "openai:x" and s.host == "0.0.0.0" and s.port == 9000
    assert s.allowed_origins == ("http://a.example", "http://b.example")
    assert s.mcp_config == Path("/etc/mcp.json") and s.mcp_sampling == "deny"
    assert (s.ping_interval, s.admit_max_lag, s.admit_wait, s.header_timeout) == (0.5, 0.025, 3.0, 2.5)
    assert (s.log_level, s.log_format, s.access_log, s.gc, s.loop) == ("debug", "text", "on", "default", "asyncio")
    assert s.key_file == Path("/tmp/k.key") and s.home == Path("/tmp/h") and s.root == Path("/srv")
    assert s.server == "http://s" and s.key == "ts_secret" and s.title_model == "openai:small"
    assert (s.takeover, s.shutdown_grace, s.tools) == ("interrupt", 5.0, "my.tools:TOOLS")
    assert (s.notebook_sandbox, s.notebook_network, s.max_kernels, s.kernel_idle_timeout, s.kernel_memory_mb) == (
        False, True, 4, 0.0, 1024)
    assert (s.notebook_file_mb, s.notebook_files_mb) == (8, 64)
    assert s.agents == Path("/etc/agents.json")
    assert s.audit_redact == ("acct-[0-9]{8}", "pw=\\S+")
    b = s.budgets()
    assert (b.turn.tokens, b.turn.nano_usd, b.session.tokens, b.session.nano_usd) == (5000, 250_000_000, 90000,
                                                                                     2_000_000_000)
    assert (b.user_day.tokens, b.user_day.nano_usd, b.warn_at, b.on_limit) == (1_000_000, 10_500_000_000, 0.9,
                                                                               "answer")
    assert s.prices == Path("/etc/prices.json")
    limits = s.limits(max_steps=3)
    assert (limits.context_tokens, limits.context_fraction, limits.max_steps) == (16384, 0.7, 3)
    assert limits.budgets == b
    assert "ts_secret" not in repr(s)


@pytest.mark.parametrize(("var", "value"), [("TURNSTREAM_PORT", "eighty"), ("TURNSTREAM_DB", "mysql://x/y"),
                                            ("TURNSTREAM_LOG_FORMAT", "xml"), ("TURNSTREAM_PING_INTERVAL", "soon"),
                                            ("TURNSTREAM_AUDIT_REDACT", "acct-1"),
                                            ("TURNSTREAM_AUDIT_REDACT", '["acct-[0-9"]'),
                                            ("TURNSTREAM_BUDGET_TURN_USD", "lots"),
                                            ("TURNSTREAM_BUDGET_TURN_USD", "0.0000000001"),
                                            ("TURNSTREAM_BUDGET_WARN_AT", "1.5"), ("TURNSTREAM_MCP_SAMPLING", "maybe")])
def test_a_value_that_cannot_be_read_names_its_variable(var: str, value: str) -> None:
    with pytest.raises(UsageError, match=var):
        Settings.from_env({var: value})


def test_flags_win_over_the_environment() -> None:
    env = Settings.from_env({"TURNSTREAM_DB": "memory://", "TURNSTREAM_PORT": "9000"})
    args = build_parser(env).parse_args(["serve", "--db", "sqlite:///x.db"])
    s = env.overlay(**vars(args))
    assert s.db.kind == "sqlite" and s.db.target == "x.db"
    assert s.port == 9000  # not given: the environment's value stays


def test_the_default_model_rule_is_one() -> None:
    both = Settings.from_env({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"})
    assert both.default_model("demo") == ("anthropic:claude-sonnet-4-5", False)
    assert Settings.from_env({"OPENAI_API_KEY": "o"}).default_model("demo") == ("openai:gpt-4.1", False)
    assert Settings(model="scripted:echo").default_model("demo") == ("scripted:echo", False)


@pytest.mark.parametrize(("url", "kind", "target"), [
    ("sqlite:///rel.db", "sqlite", "rel.db"), ("SQLITE:////abs/x.db", "sqlite", "/abs/x.db"),
    ("sqlite:///:memory:", "sqlite", ":memory:"), ("memory://", "memory", ""),
    ("postgres://u@h/d", "postgres", "postgresql://u@h/d"), ("PostgreSQL://u@h/d", "postgres", "postgresql://u@h/d"),
    ("postgresql+psycopg://u@h/d", "postgres", "postgresql://u@h/d"),
])
def test_database_urls(url: str, kind: str, target: str) -> None:
    db = DatabaseURL.parse(url)
    assert (db.kind, db.target) == (kind, target)


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="@/:?#[]"),
               min_size=1, max_size=30))
def test_a_password_is_never_shown(password: str) -> None:
    db = DatabaseURL.parse(f"postgresql://ann:{password}@db.example:5432/app")
    assert str(db) == "postgresql://ann:***@db.example:5432/app"
    assert db.target.endswith(f":{password}@db.example:5432/app")  # the store still gets it


def test_the_docs_table_is_the_code_table() -> None:
    text = DOCS.read_text()
    m = re.search(r"<!-- settings table: begin -->\n(.*)<!-- settings table: end -->", text, re.S)
    assert m is not None
    assert m.group(1) == markdown_table()
