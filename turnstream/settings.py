"""Every setting of the commands, read once from the environment into one frozen object.

``Settings.from_env()`` reads ``TURNSTREAM_*`` (and whether a provider key is set) once;
the command line overlays its flags with ``overlay`` (a flag and its variable are one
setting); everything else receives the object. ``SETTINGS`` is the one table of them: the
parser takes its help text from it, and docs/settings.md is written from it
(``markdown_table()``; a test keeps the page in step).

Two values are parsed here once for everyone: the database URL (``DatabaseURL``: the store,
the bus and the key file all read the parsed value) and the default model
(``default_model``: the server and the terminal chat follow the same rule).

Why one module of this size: the table is the one place a setting is declared (its variable,
flag, commands, parser and help), so it grows by a few lines per setting and stays one list.

The provider adapters read their own keys and base URLs (``ANTHROPIC_API_KEY``,
``OPENAI_BASE_URL``, …) when one is made, as the official SDKs do; the library works
without this object.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import orjson

from .errors import UsageError
from .limits import Budgets, Ceiling, Limits, usd

if TYPE_CHECKING:
    from .pricing import Price

DEFAULT_DB = "sqlite:///./turnstream.db"
ANTHROPIC_DEFAULT = "anthropic:claude-sonnet-4-5"
OPENAI_DEFAULT = "openai:gpt-4.1"
SERVER_DEMO = "scripted:notebook-demo"
CHAT_DEMO = "scripted:chat-demo"

_DB_FORMS = "sqlite:///path/to.db, sqlite:///:memory:, postgresql://user@host/dbname or memory://"


@dataclass(frozen=True, slots=True)
class DatabaseURL:
    """A parsed ``--db`` / ``TURNSTREAM_DB``. ``kind`` says which store (and bus) it names;
    ``target`` is the SQLite file (``:memory:`` for a private one) or the PostgreSQL URL
    (``postgresql://…``); ``url`` is what was given. ``str()`` hides a password."""

    kind: Literal["sqlite", "postgres", "memory"]
    target: str
    url: str

    @classmethod
    def parse(cls, url: str) -> DatabaseURL:
        """Forms: ``sqlite:///relative.db``, ``sqlite:////absolute.db``, ``sqlite:///:memory:``,
        ``postgresql://…`` or ``postgres://…`` (``postgresql+psycopg://`` too, an older
        spelling of the same database) and ``memory://``. ``UsageError`` otherwise, which
        echoes only the scheme (the rest may hold a password)."""
        url = url.strip()
        scheme, sep, rest = url.partition("://")
        scheme = scheme.lower()
        if not sep:
            raise UsageError(f"the database must be given as a URL ({_DB_FORMS}), not {url!r}")
        if scheme == "memory":
            return cls("memory", "", url)
        if scheme == "sqlite":
            if not rest.startswith("/") or rest == "/":
                raise UsageError(f"a SQLite URL needs three slashes and a path: {_DB_FORMS}")
            return cls("sqlite", rest[1:], url)
        if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
            return cls("postgres", "postgresql://" + rest, url)
        raise UsageError(f"unknown database URL scheme {scheme + '://'!r} (--db / TURNSTREAM_DB); use {_DB_FORMS}")

    @property
    def persistent(self) -> bool:
        """True when the data outlives the process."""
        return self.kind == "postgres" or (self.kind == "sqlite" and self.target != ":memory:")

    @property
    def shared(self) -> bool:
        """True when several processes may use the database at once (turns, events, the bus)."""
        return self.kind == "postgres"

    def __str__(self) -> str:
        parts = urlsplit(self.url)
        if parts.password:
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return urlunsplit((parts.scheme, f"{parts.username}:***@{host}{port}", parts.path, parts.query, ""))
        return self.url


def _origins(value: str) -> tuple[str, ...]:
    return tuple(o.strip().rstrip("/") for o in value.split(",") if o.strip())


def _seconds_from_ms(value: str) -> float:
    return float(value) / 1000


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        v = value.strip().lower()
        if v not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return v
    return parse


def _switch(value: str) -> bool:
    v = value.strip().lower()
    if v not in ("on", "off"):
        raise ValueError("must be on or off")
    return v == "on"


def _positive_int(value: str) -> int:
    n = int(value)
    if n <= 0:
        raise ValueError("must be a positive whole number")
    return n


def _seconds_or_off(value: str) -> float:
    """Seconds, or 0 for ``off``."""
    if value.strip().lower() == "off":
        return 0.0
    n = float(value)
    if n <= 0:
        raise ValueError("must be a positive number of seconds, or off")
    return n


def _patterns(value: str) -> tuple[str, ...]:
    """A JSON array of regular expressions, each one checked."""
    try:
        items = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise ValueError('expected a JSON array of regular expressions, e.g. ["acct-[0-9]{8}"]') from None
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise ValueError('expected a JSON array of regular expressions, e.g. ["acct-[0-9]{8}"]')
    for item in items:
        try:
            re.compile(item)
        except re.error as exc:
            raise ValueError(f"{item!r} is not a regular expression: {exc}") from None
    return tuple(items)


def _fraction(value: str) -> float:
    f = float(value)
    if not 0 < f <= 1:
        raise ValueError("must be a fraction above 0 and at most 1, e.g. 0.8")
    return f


def _dollars(value: str) -> int:
    """Dollars as nano-dollars (``0.50`` is 500000000)."""
    try:
        return usd(value.strip().lstrip("$"))
    except ArithmeticError:
        raise ValueError("must be an amount of dollars, e.g. 0.50") from None


def _path(value: str) -> Path:
    return Path(value).expanduser()


def _folder(value: str) -> Path:
    return Path(value).expanduser().resolve()


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the table: the field it fills, its variable, its flag, how to read it."""

    name: str
    env: str
    help: str
    parse: Callable[[str], Any] = str
    flag: str | None = None
    commands: tuple[str, ...] = ("serve",)


SETTINGS: tuple[Setting, ...] = (
    Setting("db", "TURNSTREAM_DB", "the database: sqlite:///path, postgresql://… or memory://",
            DatabaseURL.parse, "--db", ("serve", "replay", "users", "audit")),
    Setting("model", "TURNSTREAM_MODEL", "provider:model; without it, from the API key that is set, else the "
            "offline demo", str, "--model", ("serve", "chat")),
    Setting("tools", "TURNSTREAM_TOOLS", "server tools added to every session: package.module:NAME, a list of "
            "@tool functions", str, "--tools"),
    Setting("mcp_config", "TURNSTREAM_MCP_CONFIG", "MCP servers whose tools join every session (serve) or the "
            "chat: a JSON file in the mcpServers format (docs/mcp.md)", _path, "--mcp-config", ("serve", "chat")),
    Setting("mcp_sampling", "TURNSTREAM_MCP_SAMPLING", "when an MCP server asks the model (sampling): ask "
            "(the user approves each request), allow or deny (docs/mcp.md)", _choice("ask", "allow", "deny"), None,
            ("serve", "chat")),
    Setting("agents", "TURNSTREAM_AGENTS", "a JSON file of agents (docs/agents.md) that sessions created without "
            "their own agents get", _path, "--agents"),
    Setting("host", "TURNSTREAM_HOST", "the address to listen on", str, "--host"),
    Setting("port", "TURNSTREAM_PORT", "the port to listen on (0 picks a free one)", int, "--port"),
    Setting("title_model", "TURNSTREAM_TITLE_MODEL", "provider:model that writes a short title for each new "
            "chat after its first message (without it, the first message is the title)"),
    Setting("allowed_origins", "TURNSTREAM_ALLOWED_ORIGINS", "origins allowed on the WebSocket besides the "
            "server's own, comma-separated", _origins),
    Setting("ping_interval", "TURNSTREAM_PING_INTERVAL", "seconds between SSE comment pings", float),
    Setting("attachment_mb", "TURNSTREAM_ATTACHMENT_MB", "largest image or PDF in a message or a tool result, "
            "in MiB (413 above it)", float),
    Setting("max_attachments", "TURNSTREAM_MAX_ATTACHMENTS", "most images and files in one message (413 above "
            "it)", _positive_int),
    Setting("queued_messages", "TURNSTREAM_QUEUED_MESSAGES", "a message sent while a turn runs goes to the model "
            "at the turn's next step (next_step) or starts the next turn (next_turn)",
            _choice("next_step", "next_turn")),
    Setting("scenario_dir", "TURNSTREAM_SCENARIO_DIR", "a folder sessions may take scripted: scenario files "
            "from (without it, only built-in scenarios)", _folder),
    Setting("admit_max_lag", "TURNSTREAM_ADMIT_MAX_LAG_MS", "new turns wait while the event loop runs this "
            "many ms late (0 turns the admission gate off)", _seconds_from_ms),
    Setting("admit_wait", "TURNSTREAM_ADMIT_WAIT_S", "seconds within which a new turn starts; one that "
            "could not is refused at once with 503 and Retry-After", float),
    Setting("key_file", "TURNSTREAM_KEY_FILE", "where serve keeps the login key (default: beside the SQLite "
            "file, else under ~/.config/turnstream/)", _path),
    Setting("header_timeout", "TURNSTREAM_HEADER_TIMEOUT", "seconds a request may take to send its headers "
            "before the connection is closed", float),
    Setting("log_level", "TURNSTREAM_LOG_LEVEL", "DEBUG also logs provider requests (keys redacted)",
            _choice("debug", "info", "warning", "error")),
    Setting("log_format", "TURNSTREAM_LOG_FORMAT", "auto (text lines on a terminal, else json), json (one "
            "object per line) or text", _choice("auto", "json", "text")),
    Setting("access_log", "TURNSTREAM_ACCESS_LOG", "auto (a line per HTTP request unless the log goes to a "
            "terminal), on or off", _choice("auto", "on", "off")),
    Setting("gc", "TURNSTREAM_GC", "tuned (freeze start-up objects, rarer young collections) or default",
            _choice("tuned", "default")),
    Setting("loop", "TURNSTREAM_LOOP", "the event loop: uvloop when installed, or asyncio",
            _choice("uvloop", "asyncio")),
    Setting("takeover", "TURNSTREAM_TAKEOVER", "what becomes of a running turn whose process died: continue "
            "(taken over where it stood) or interrupt (ended)", _choice("continue", "interrupt")),
    Setting("shutdown_grace", "TURNSTREAM_SHUTDOWN_GRACE", "seconds a stopping server (SIGTERM) lets running "
            "turns finish before leaving them to another process", float),
    Setting("notebook_sandbox", "TURNSTREAM_NOTEBOOK_SANDBOX", "on: every notebook kernel runs in a bubblewrap "
            "sandbox (no sandbox, no cells); off: cells run unsandboxed, with a warning", _switch),
    Setting("notebook_network", "TURNSTREAM_NOTEBOOK_NETWORK", "on lets notebook kernels use the network",
            _switch),
    Setting("max_kernels", "TURNSTREAM_MAX_KERNELS", "notebook kernels alive at once (default: 3/4 of the "
            "memory over the memory of a kernel, at least 2); at the cap the least recently used stops",
            _positive_int),
    Setting("kernel_idle_timeout", "TURNSTREAM_KERNEL_IDLE_TIMEOUT", "seconds an idle notebook kernel lives "
            "(default 900), or off", _seconds_or_off),
    Setting("kernel_memory_mb", "TURNSTREAM_KERNEL_MEMORY_MB", "memory of one notebook kernel, in MiB "
            "(default 2048)", _positive_int),
    Setting("notebook_file_mb", "TURNSTREAM_NOTEBOOK_FILE_MB", "largest data file one may upload to a notebook, "
            "in MiB (default 25)", _positive_int),
    Setting("notebook_files_mb", "TURNSTREAM_NOTEBOOK_FILES_MB", "all the data files of one notebook together, "
            "in MiB (default 100)", _positive_int),
    Setting("audit_redact", "TURNSTREAM_AUDIT_REDACT", "more secrets the audit export hides besides API keys: "
            "a JSON array of regular expressions", _patterns, None, ("serve", "audit")),
    Setting("budget_turn_tokens", "TURNSTREAM_BUDGET_TURN_TOKENS", "tokens one turn may use before it pauses "
            "and asks (docs/budgets.md)", _positive_int, None, ("serve", "chat")),
    Setting("budget_turn_usd", "TURNSTREAM_BUDGET_TURN_USD", "dollars one turn may spend before it pauses and "
            "asks", _dollars, None, ("serve", "chat")),
    Setting("budget_session_tokens", "TURNSTREAM_BUDGET_SESSION_TOKENS", "tokens one chat may use over all "
            "its turns", _positive_int, None, ("serve", "chat")),
    Setting("budget_session_usd", "TURNSTREAM_BUDGET_SESSION_USD", "dollars one chat may spend over all its "
            "turns", _dollars, None, ("serve", "chat")),
    Setting("budget_user_day_tokens", "TURNSTREAM_BUDGET_USER_DAY_TOKENS", "tokens one user may use per UTC "
            "day, over all chats and server processes", _positive_int, None, ("serve", "chat")),
    Setting("budget_user_day_usd", "TURNSTREAM_BUDGET_USER_DAY_USD", "dollars one user may spend per UTC day",
            _dollars, None, ("serve", "chat")),
    Setting("budget_warn_at", "TURNSTREAM_BUDGET_WARN_AT", "the fraction of a budget at which a budget_warning "
            "event is sent", _fraction, None, ("serve", "chat")),
    Setting("budget_on_limit", "TURNSTREAM_BUDGET_ON_LIMIT", "at a budget: ask (pause with an approval request) "
            "or answer (end with one tools-off answer)", _choice("ask", "answer"), None, ("serve", "chat")),
    Setting("context_tokens", "TURNSTREAM_CONTEXT_TOKENS", "the model's context window in tokens, for a model the "
            "built-in table does not know (default 128000; docs/context.md)", _positive_int, None, ("serve", "chat")),
    Setting("context_fraction", "TURNSTREAM_CONTEXT_FRACTION", "the share of the context window past which old "
            "tool results are cleared from a request (default 0.8)", _fraction, None, ("serve", "chat")),
    Setting("prices", "TURNSTREAM_PRICES", "a JSON file of model prices that adds to or replaces the built-in "
            "table (docs/budgets.md)", _path, None, ("serve", "chat")),
    Setting("home", "TURNSTREAM_HOME", "where the terminal chat keeps its history (default: "
            "$XDG_DATA_HOME/turnstream)", _path, None, ("chat",)),
    Setting("root", "TURNSTREAM_ROOT", "the folder the chat's file tools may read", _path, "--root", ("chat",)),
    Setting("server", "TURNSTREAM_SERVER", "run the chat's turns on this turnstream server (its tools run "
            "here)", str, "--server", ("chat",)),
    Setting("key", "TURNSTREAM_KEY", "the API key for --server", str, "--key", ("chat",)),
)
"""Every setting, in the order the docs list them."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the commands run with. Defaults are the documented ones; ``from_env`` fills in
    what the environment sets and ``overlay`` what the command line does."""

    db: DatabaseURL = field(default_factory=lambda: DatabaseURL.parse(DEFAULT_DB))
    model: str = ""
    """The configured model ("" when none: see ``default_model``)."""
    tools: str = ""
    mcp_config: Path | None = None
    mcp_sampling: str = "ask"
    """What an MCP server's ``sampling/createMessage`` gets: ask, allow or deny."""
    agents: Path | None = None
    """The agents file: what a session created without agents gets (docs/agents.md)."""
    title_model: str = ""
    """The model that titles new chats ("" when none)."""
    host: str = "127.0.0.1"
    port: int = 8000
    allowed_origins: tuple[str, ...] = ()
    ping_interval: float = 15.0
    attachment_mb: float = 5.0
    max_attachments: int = 10
    queued_messages: str = "next_step"
    scenario_dir: Path | None = None
    admit_max_lag: float = 0.010
    admit_wait: float = 2.0
    key_file: Path | None = None
    header_timeout: float = 10.0
    log_level: str = "info"
    log_format: str = "auto"
    access_log: str = "auto"
    gc: str = "tuned"
    loop: str = "uvloop"
    notebook_sandbox: bool = True
    notebook_network: bool = False
    max_kernels: int | None = None
    kernel_idle_timeout: float | None = None
    """None: the notebook's default (``notebook/config.py``); 0: no idle stop."""
    kernel_memory_mb: int | None = None
    """None: the notebook's default (``notebook/config.py``)."""
    notebook_file_mb: int | None = None
    """None: the notebook's default (``notebook/config.py``, ``FileLimits``)."""
    notebook_files_mb: int | None = None
    takeover: str = "continue"
    audit_redact: tuple[str, ...] = ()
    shutdown_grace: float = 30.0
    budget_turn_tokens: int | None = None
    budget_turn_usd: int | None = None
    """Nano-dollars (the variable is read in dollars)."""
    budget_session_tokens: int | None = None
    budget_session_usd: int | None = None
    budget_user_day_tokens: int | None = None
    budget_user_day_usd: int | None = None
    budget_warn_at: float = 0.8
    budget_on_limit: str = "ask"
    context_tokens: int | None = None
    """The context window of a model the built-in table does not know (``Limits.context_tokens``)."""
    context_fraction: float = 0.8
    prices: Path | None = None
    home: Path | None = None
    root: Path = Path(".")
    server: str | None = None
    key: str | None = field(default=None, repr=False)
    """A secret: never shown by ``repr``."""
    anthropic_key_set: bool = False
    """Whether ``ANTHROPIC_API_KEY`` is set (the default-model rule needs no more than that)."""
    openai_key_set: bool = False
    demo: bool = False
    """Set by ``serve`` when no model was configured and it runs the offline demo."""
    heartbeat_interval: float = 10.0
    """Seconds between this process's heartbeats in a shared database."""
    stale_after: float = 45.0
    """A process that has not beaten for this long counts as gone, though it holds its
    liveness lock (hung): its turns are taken over."""
    sweep_interval: float = 1.0
    """Seconds between looks for turns whose process died."""
    static_dir: Path | None = None
    """The web UI's files (the package's ``server/static`` when None)."""

    def __post_init__(self) -> None:
        if isinstance(self.db, str):  # a URL given as text (tests, library callers)
            object.__setattr__(self, "db", DatabaseURL.parse(self.db))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the environment gives; ``UsageError`` naming the variable for a
        value that cannot be read."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for s in SETTINGS:
            raw = env.get(s.env)
            if raw is None or not raw.strip():
                continue
            try:
                values[s.name] = s.parse(raw)
            except UsageError as exc:
                raise UsageError(f"{s.env}: {exc}") from None
            except ValueError as exc:
                raise UsageError(f"{s.env}={raw!r} cannot be used: {exc}") from None
        return cls(**values, anthropic_key_set=bool(env.get("ANTHROPIC_API_KEY")),
                   openai_key_set=bool(env.get("OPENAI_API_KEY")))

    def overlay(self, **flags: Any) -> Settings:
        """These settings with the flags that were given (None means "not given")."""
        known = {f.name for f in fields(self)}
        given = {k: v for k, v in flags.items() if v is not None and k in known}
        return replace(self, **given)

    def default_model(self, demo: str) -> tuple[str, bool]:
        """The model to run and whether it is the offline demo: the configured one; else
        Anthropic's when its key is set, else OpenAI's when its key is set; else ``demo``."""
        if self.model:
            return self.model, False
        if self.anthropic_key_set:
            return ANTHROPIC_DEFAULT, False
        if self.openai_key_set:
            return OPENAI_DEFAULT, False
        return demo, True

    def budgets(self) -> Budgets:
        """The budget ceilings these settings set (``Limits.budgets``)."""
        return Budgets(turn=Ceiling(self.budget_turn_tokens, self.budget_turn_usd),
                       session=Ceiling(self.budget_session_tokens, self.budget_session_usd),
                       user_day=Ceiling(self.budget_user_day_tokens, self.budget_user_day_usd),
                       warn_at=self.budget_warn_at, on_limit="answer" if self.budget_on_limit == "answer" else "ask")

    def limits(self, **given: Any) -> Limits:
        """A turn's limits as these settings set them (budgets, context window), with ``given``."""
        return Limits(budgets=self.budgets(), context_tokens=self.context_tokens,
                      context_fraction=self.context_fraction, **given)

    def price_table(self) -> dict[str, Price]:
        """The built-in prices, with those of the ``prices`` file when one is set."""
        from .pricing import PRICES, load_prices

        return dict(PRICES) if self.prices is None else load_prices(self.prices)

    def chat_home(self, environ: Mapping[str, str] | None = None) -> Path:
        """Where the terminal chat keeps its history: ``home``, else the user's data folder."""
        if self.home is not None:
            return self.home
        env = os.environ if environ is None else environ
        base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "turnstream"


def markdown_table() -> str:
    """docs/settings.md's table, from ``SETTINGS`` and the defaults of ``Settings``."""
    defaults = Settings()
    rows = ["| variable | flag | commands | default | what it sets |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        value = getattr(defaults, s.name)
        if s.name == "admit_max_lag":
            shown = f"`{value * 1000:g}`"
        elif s.name.startswith("budget_") and s.name.endswith("_usd"):
            shown = "—" if value is None else f"`{value / 1e9:g}`"
        elif value is None or value == () or value == "":
            shown = "—"
        else:
            shown = f"`{value}`"
        rows.append(f"| `{s.env}` | {f'`{s.flag}`' if s.flag else '—'} | {', '.join(s.commands)} | {shown} "
                    f"| {s.help} |")
    return "\n".join(rows) + "\n"


__all__ = ["CHAT_DEMO", "DEFAULT_DB", "SERVER_DEMO", "SETTINGS", "DatabaseURL", "Setting", "Settings",
           "markdown_table"]
