"""The ``turnstream`` command. Every flag has an environment variable of the same name
(``--db`` = ``TURNSTREAM_DB``, ``--model`` = ``TURNSTREAM_MODEL``, ``--port`` = ``TURNSTREAM_PORT``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"TURNSTREAM_{name}") or default


def _cmd_mock_provider(args: argparse.Namespace) -> int:
    import uvicorn

    from .mock.server import build_app

    print(f"turnstream mock-provider on http://{args.host}:{args.port} "
          f"(scenario: {args.scenario or 'echo'})", flush=True)
    uvicorn.run(build_app(args.scenario), host=args.host, port=args.port, log_level="warning")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from .server.main import serve

    code: int = serve(host=args.host, port=args.port, db=args.db, model=args.model)
    return code


def _cmd_chat(args: argparse.Namespace) -> int:
    from .terminal import main as chat_main

    return chat_main(args)


def _cmd_replay(args: argparse.Namespace) -> int:
    from .replay import replay

    code: int = asyncio.run(replay(args.session_id, db=args.db))
    return code


def _cmd_users(args: argparse.Namespace) -> int:
    from .store import open_store

    async def add() -> int:
        store = open_store(args.db)
        await store.open()
        try:
            user, key = await store.create_user(args.name)
        finally:
            await store.aclose()
        print(f"user {user.name} ({user.id})")
        print(f"API key (shown once): {key}")
        return 0

    return asyncio.run(add())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="turnstream", description="Streaming tool calls done right.")
    sub = p.add_subparsers(dest="command", required=True)
    db_default = _env("DB")

    s = sub.add_parser("serve", help="the HTTP API and web UI")
    s.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    s.add_argument("--port", type=int, default=int(_env("PORT", "8000") or 8000))
    s.add_argument("--db", default=db_default, help="sqlite:///path (default ./turnstream.db) or postgresql://…")
    s.add_argument("--model", default=_env("MODEL"), help="provider:model (default: from the API keys, else the demo)")
    s.set_defaults(fn=_cmd_serve)

    c = sub.add_parser("chat", help="terminal chat")
    c.add_argument("--model", default=_env("MODEL"))
    c.add_argument("--root", default=_env("ROOT", "."), type=Path)
    c.add_argument("--server", default=_env("SERVER"))
    c.add_argument("--key", default=_env("KEY"))
    c.add_argument("--session", default=None)
    c.set_defaults(fn=_cmd_chat)

    m = sub.add_parser("mock-provider", help="a local server speaking the providers' streaming formats")
    m.add_argument("--host", default="127.0.0.1")
    m.add_argument("--port", type=int, default=8765)
    m.add_argument("--scenario", default=None, help="scenario file or built-in name")
    m.set_defaults(fn=_cmd_mock_provider)

    r = sub.add_parser("replay", help="print a stored session block by block")
    r.add_argument("session_id")
    r.add_argument("--db", default=db_default)
    r.set_defaults(fn=_cmd_replay)

    u = sub.add_parser("users", help="manage users")
    usub = u.add_subparsers(dest="users_command", required=True)
    ua = usub.add_parser("add", help="create a user and print its API key once")
    ua.add_argument("name")
    ua.add_argument("--db", default=db_default)
    ua.set_defaults(fn=_cmd_users)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.fn(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
