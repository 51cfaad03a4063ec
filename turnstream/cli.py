"""The ``turnstream`` command.

The environment is read once (``Settings.from_env()``); every flag is the same setting as
its variable (``--db`` is ``TURNSTREAM_DB``) and, when given, wins over it. A flag's help
comes from the settings table and names its variable and its default.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import StoreError, UsageError, UserExists
from .settings import SETTINGS, Settings


def _cmd_mock_provider(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from .mock.server import build_app

    print(f"turnstream mock-provider on http://{args.host}:{args.port} "
          f"(scenario: {args.scenario or 'echo'})", flush=True)
    uvicorn.run(build_app(args.scenario), host=args.host, port=args.port, log_level="warning")
    return 0


def _cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from .server.main import serve

    code: int = serve(settings)
    return code


def _cmd_chat(args: argparse.Namespace, settings: Settings) -> int:
    from .chat import main as chat_main

    return chat_main(settings, session=args.session)


def _cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from .replay import replay

    db = settings.db
    if db.kind == "sqlite" and db.persistent and not Path(db.target).is_file():
        # Reading must not leave an empty database behind (opening a SQLite file creates it).
        print(f"turnstream replay: there is no database at {db.target} (--db / TURNSTREAM_DB name the one "
              "to read)", file=sys.stderr)
        return 1
    try:
        code: int = asyncio.run(replay(args.session_id, db=db))
    except StoreError as exc:
        print(f"turnstream replay: {exc}", file=sys.stderr)
        return 1
    return code


def _cmd_users(args: argparse.Namespace, settings: Settings) -> int:
    from .store import open_store

    async def add() -> int:
        store = open_store(settings.db)
        await store.open()
        try:
            user, key = await store.create_user(args.name)
        finally:
            await store.aclose()
        print(f"user {user.name} ({user.id})")
        print(f"API key (shown once): {key}")
        return 0

    try:
        return asyncio.run(add())
    except (UserExists, StoreError) as exc:
        print(f"turnstream users add: {exc}", file=sys.stderr)
        return 1


def _cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    import orjson

    from .audit import Redactor, jsonl_records, session_audit
    from .store import open_store

    db = settings.db
    if db.kind == "sqlite" and db.persistent and not Path(db.target).is_file():
        print(f"turnstream audit: there is no database at {db.target} (--db / TURNSTREAM_DB name the one "
              "to read)", file=sys.stderr)
        return 1

    async def read() -> dict[str, Any] | None:
        store = open_store(db)
        await store.open()
        try:
            if await store.get_session(args.session_id) is None:
                return None
            return await session_audit(store, args.session_id)
        finally:
            await store.aclose()

    try:
        audit = asyncio.run(read())
    except StoreError as exc:
        print(f"turnstream audit: {exc}", file=sys.stderr)
        return 1
    if audit is None:
        print(f"turnstream audit: no session {args.session_id} in {db}", file=sys.stderr)
        return 1
    redacted = Redactor(settings.audit_redact).value(audit)
    if args.jsonl:
        for record in jsonl_records(redacted):
            sys.stdout.write(orjson.dumps(record).decode() + "\n")
    else:
        sys.stdout.write(orjson.dumps(redacted, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _flag(parser: argparse.ArgumentParser, name: str, defaults: Settings, *, type_: Any = str) -> None:
    """Add the flag of setting ``name``; its default stays None ("not given") so that the
    environment's value, already in ``defaults``, is kept unless the flag is used."""
    spec = next(s for s in SETTINGS if s.name == name)
    assert spec.flag is not None
    current = getattr(defaults, name)
    shown = "none" if current in (None, "") else str(current)
    parser.add_argument(spec.flag, dest=name, default=None, type=type_, metavar=name.upper(),
                        help=f"{spec.help} (${spec.env}; now: {shown})")


def build_parser(defaults: Settings | None = None) -> argparse.ArgumentParser:
    d = defaults or Settings()
    p = argparse.ArgumentParser(prog="turnstream", description="Streaming tool calls done right.")
    try:
        version = metadata.version("turnstream")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "0"
    p.add_argument("--version", action="version", version=f"turnstream {version}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="the HTTP API and web UI")
    _flag(s, "host", d)
    _flag(s, "port", d, type_=int)
    _flag(s, "db", d)
    _flag(s, "model", d)
    _flag(s, "tools", d)
    _flag(s, "mcp_config", d, type_=Path)
    _flag(s, "agents", d, type_=Path)
    s.set_defaults(fn=_cmd_serve)

    c = sub.add_parser("chat", help="terminal chat")
    _flag(c, "model", d)
    _flag(c, "root", d, type_=Path)
    _flag(c, "server", d)
    _flag(c, "key", d)
    _flag(c, "mcp_config", d, type_=Path)
    c.add_argument("--session", default=None, help="resume this conversation (its id)")
    c.set_defaults(fn=_cmd_chat)

    m = sub.add_parser("mock-provider", help="a local server speaking the providers' streaming formats")
    m.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    m.add_argument("--port", type=int, default=8765, help="the port to listen on (default: 8765)")
    m.add_argument("--scenario", default=None, help="scenario file or built-in name (default: echo)")
    m.set_defaults(fn=_cmd_mock_provider)

    r = sub.add_parser("replay", help="print a stored session block by block", formatter_class=_Examples,
                       description="Print a stored session, turn by turn and block by block: text, thinking, "
                                   "tool calls and their results, each turn's status and usage. Only reads.",
                       epilog="examples:\n  turnstream replay ses_3f0c9d… --db sqlite:///turnstream.db\n"
                              "  turnstream replay notes --db sqlite:///$HOME/.local/share/turnstream/chat.db")
    r.add_argument("session_id", metavar="SESSION_ID",
                   help="the session's id: ses_… in the web page's address (#session=…), or the id the terminal "
                        "chat names when you leave it")
    _flag(r, "db", d)
    r.set_defaults(fn=_cmd_replay)

    a = sub.add_parser("audit", help="export a session's audit trail of tool calls", formatter_class=_Examples,
                       description="Print every tool call of a session with its input, result, start, end and "
                                   "duration, and who approved or denied it, when and why; API keys and the "
                                   "patterns of TURNSTREAM_AUDIT_REDACT are redacted. Only reads.",
                       epilog="examples:\n  turnstream audit ses_3f0c9d… --db sqlite:///turnstream.db\n"
                              "  turnstream audit ses_3f0c9d… --jsonl > audit.jsonl")
    a.add_argument("session_id", metavar="SESSION_ID", help="the session's id (ses_…)")
    a.add_argument("--jsonl", action="store_true", help="one JSON object per line (grants, then tool runs)")
    _flag(a, "db", d)
    a.set_defaults(fn=_cmd_audit)

    u = sub.add_parser("users", help="manage the users of a server's database",
                       description="Manage the users of a server's database.")
    usub = u.add_subparsers(dest="users_command", required=True, metavar="COMMAND")
    ua = usub.add_parser("add", help="create a user and print its API key once", formatter_class=_Examples,
                         description="Create a user and print its API key, once: only a hash of the key is "
                                     "stored. A name that another user has is refused.",
                         epilog="example:\n  turnstream users add ada --db sqlite:///turnstream.db\n"
                                "  then: turnstream chat --server http://127.0.0.1:8000 --key <the key>")
    ua.add_argument("name", metavar="NAME", help="a name for the user, unique in the database")
    _flag(ua, "db", d)
    ua.set_defaults(fn=_cmd_users)
    return p


class _Examples(argparse.HelpFormatter):
    """Help whose description is wrapped to the terminal and whose indented example lines
    (and the headings above them) are kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(line if line.startswith(" ") or line.endswith(":") else
                         textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
                         for line in text.splitlines())


def main(argv: list[str] | None = None) -> int:
    try:
        settings = Settings.from_env()
    except UsageError as exc:
        print(f"turnstream: {exc}", file=sys.stderr)
        return 2
    args = build_parser(settings).parse_args(argv)
    flags = {k: v for k, v in vars(args).items() if k not in ("fn", "command", "users_command")}
    try:
        settings = settings.overlay(**flags)
    except UsageError as exc:  # e.g. --db with a URL that cannot be read
        print(f"turnstream {args.command}: {exc}", file=sys.stderr)
        return 2
    try:
        code: int = args.fn(args, settings)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
