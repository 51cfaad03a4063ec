"""``turnstream serve``: open the store, recover, make sure a user can log in, serve.

Settings (each flag has its environment variable; see ``cli.py``): ``--db`` /
``TURNSTREAM_DB``, ``--model`` / ``TURNSTREAM_MODEL``, plus ``TURNSTREAM_ALLOWED_ORIGINS``,
``TURNSTREAM_PING_INTERVAL``, ``TURNSTREAM_SCENARIO_DIR``, ``TURNSTREAM_ADMIT_MAX_LAG_MS``,
``TURNSTREAM_ADMIT_MAX_WAIT``, ``TURNSTREAM_LOG_LEVEL``, ``TURNSTREAM_LOG_FORMAT`` and
``TURNSTREAM_KEY_FILE``.

The login key: keys are stored hashed, so the key printed at start-up is kept in a key
file readable only by its owner (``<database file>.key`` for SQLite, else under
``~/.config/turnstream/``). On first start — no key file, or its key no longer valid —
a local user is created and its key written there. ``--port 0`` picks a free port; the
address printed is the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bus import Bus, open_bus
from ..errors import UsageError
from ..mock.scenario import builtin_names
from ..store import DEFAULT_DB, Store, open_store
from . import logs
from .state import AppState, Settings

GC_GEN0 = 20_000
"""Allocations between young collections while serving (Python's default is 700)."""

if TYPE_CHECKING:
    from ..notebook import KernelLimits, NotebookManager, PoolLimits, SandboxConfig

log = logging.getLogger("turnstream.server")

DEMO = "notebook-demo"


def default_model() -> tuple[str, bool]:
    """The model when none was given: from the API keys in the environment, else the demo."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5", False
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4.1", False
    names = builtin_names()
    return f"scripted:{DEMO if DEMO in names else 'echo'}", True


def key_file(db: str) -> Path:
    explicit = os.environ.get("TURNSTREAM_KEY_FILE")
    if explicit:
        return Path(explicit)
    scheme, _, rest = db.partition("://")
    if scheme == "sqlite" and rest not in ("/:memory:", "/"):
        return Path(rest[1:] + ".key")
    digest = hashlib.sha256(db.encode()).hexdigest()[:16]
    return Path.home() / ".config" / "turnstream" / f"{digest}.key"


async def login_key(store: Store, path: Path, *, persistent: bool) -> tuple[str, bool]:
    """The key to print, and whether a user was created for it."""
    if persistent and path.is_file():
        key = path.read_text().strip()
        if key and await store.user_by_key(key) is not None:
            return key, False
    _, key = await store.create_user("local")
    if persistent:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
    return key, True


def _settings(db: str, model: str, demo: bool) -> Settings:
    origins = tuple(o.strip().rstrip("/") for o in os.environ.get("TURNSTREAM_ALLOWED_ORIGINS", "").split(",")
                    if o.strip())
    ping = float(os.environ.get("TURNSTREAM_PING_INTERVAL") or 15.0)
    scenario_dir = os.environ.get("TURNSTREAM_SCENARIO_DIR")
    max_lag = float(os.environ.get("TURNSTREAM_ADMIT_MAX_LAG_MS") or 10.0) / 1000
    max_wait = float(os.environ.get("TURNSTREAM_ADMIT_MAX_WAIT") or 60.0)
    return Settings(db=db, model=model, demo=demo, allowed_origins=origins, ping_interval=ping,
                    admit_max_lag=max_lag, admit_max_wait=max_wait,
                    scenario_dir=Path(scenario_dir).resolve() if scenario_dir else None)


async def _heartbeat(store: Store, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            await store.heartbeat()
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)


async def _run(host: str, port: int, db: str, model: str, demo: bool) -> int:
    import uvicorn

    from .app import create_app

    settings = _settings(db, model, demo)
    store = open_store(db)
    await store.open()
    bus = open_bus(db)
    state: AppState | None = None
    beat: asyncio.Task[None] | None = None
    try:
        await bus.start()
        recovered = await store.recover(stale_after=settings.stale_after if bus.shared else None)
        if recovered:
            log.info("recovered %d interrupted turn(s)", len(recovered), extra={"turns": recovered})
        state = AppState(settings=settings, store=store, bus=bus, notebooks=_notebooks(store, bus))
        state.provider(model)  # fail now, not on the first message, when the model is unusable
        persistent = not db.startswith(("memory:", "sqlite:///:memory:"))
        key, created = await login_key(store, key_file(db), persistent=persistent)
        beat = asyncio.create_task(_heartbeat(store, settings.heartbeat_interval))

        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        real_port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        if demo:
            print(f"No model configured (--model, or ANTHROPIC_API_KEY / OPENAI_API_KEY): running the demo "
                  f"model {model}.", flush=True)
        if created:
            print("Created a local user; its key is kept in the key file for the next start.", flush=True)
        print(f"turnstream serving {model} on http://{shown}:{real_port}/#key={key}", flush=True)

        app = create_app(state)
        _tune_gc()
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=3, ws_ping_interval=20)
        server = uvicorn.Server(config)
        with _signals_end_serving():
            await server.serve(sockets=[sock])
        return 0
    finally:
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        if state is not None:
            await state.aclose()
        await bus.aclose()
        await store.aclose()


def _tune_gc() -> None:
    """Keep the cyclic garbage collector's pauses short while turns stream.

    Measured at 1,000 concurrent turns (bench/server_bench.py): with the defaults, six full
    collections paused the event loop for up to 94 ms each (every event in flight waited that
    long), and young collections ran 771 times. ``gc.freeze()`` moves what start-up built
    (modules, pydantic schemas, the app: most of the heap) out of every later collection,
    and a larger first threshold makes young collections rarer; the turns' own objects are
    still collected."""
    if os.environ.get("TURNSTREAM_GC", "").lower() == "default":
        return
    gc.collect()
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GC_GEN0), gen1, gen2)


@contextlib.contextmanager
def _signals_end_serving() -> Iterator[None]:
    """uvicorn handles SIGINT/SIGTERM by shutting down gracefully and then raising the
    signal again with the handlers it found, which would kill the process before the turns,
    kernels and store are closed. It finds these no-op handlers instead, so ``serve``
    returns and the clean-up below it runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _notebooks(store: Store, bus: Bus) -> NotebookManager | None:
    try:
        from ..notebook import NotebookManager
    except ImportError:  # the notebook extra is not installed
        return None

    async def broadcast(session_id: str, message: dict[str, Any]) -> None:
        bus.publish_message(session_id, message)

    sandbox, limits, pool = notebook_settings(os.environ)
    manager = NotebookManager(store, on_change=broadcast, sandbox=sandbox, limits=limits, pool=pool)
    print(manager.probe_sandbox().summary(), flush=True)  # a warning when cells run unsandboxed or cannot run
    return manager


def notebook_settings(env: Mapping[str, str]) -> tuple[SandboxConfig, KernelLimits, PoolLimits]:
    """The notebook's settings from the environment (defaults: ``turnstream/notebook/config.py``):
    ``TURNSTREAM_NOTEBOOK_SANDBOX`` (``on``, or ``off`` to run cells unsandboxed),
    ``TURNSTREAM_NOTEBOOK_NETWORK`` (``off``, or ``on``), ``TURNSTREAM_MAX_KERNELS`` (live
    kernels; default sized for the machine), ``TURNSTREAM_KERNEL_IDLE_TIMEOUT`` (seconds, or
    ``off``) and ``TURNSTREAM_KERNEL_MEMORY_MB`` (per kernel)."""
    from ..notebook import KernelLimits, PoolLimits, SandboxConfig

    def switch(name: str, default: bool) -> bool:
        value = env.get(name, "").strip().lower()
        if value in ("", "on", "off"):
            return default if not value else value == "on"
        raise UsageError(f"{name} must be on or off, not {value!r}")

    def number(name: str, *, whole: bool) -> float | None:
        value = env.get(name, "").strip().lower()
        if not value:
            return None
        try:
            n = int(value) if whole else float(value)
        except ValueError:
            n = 0
        if n <= 0:
            raise UsageError(f"{name} must be a positive {'whole ' if whole else ''}number, not {value!r}")
        return n

    sandbox = SandboxConfig(mode="bubblewrap" if switch("TURNSTREAM_NOTEBOOK_SANDBOX", True) else "off",
                            network=switch("TURNSTREAM_NOTEBOOK_NETWORK", False))
    memory = number("TURNSTREAM_KERNEL_MEMORY_MB", whole=True)
    limits = KernelLimits() if memory is None else KernelLimits(memory_bytes=int(memory) * 1024**2)
    max_kernels = number("TURNSTREAM_MAX_KERNELS", whole=True)
    no_idle_stop = env.get("TURNSTREAM_KERNEL_IDLE_TIMEOUT", "").strip().lower() == "off"
    idle = None if no_idle_stop else number("TURNSTREAM_KERNEL_IDLE_TIMEOUT", whole=False) or PoolLimits().idle_timeout
    return sandbox, limits, PoolLimits(max_kernels=None if max_kernels is None else int(max_kernels),
                                       idle_timeout=idle)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (``uvicorn[standard]`` brings it), as uvicorn
    itself would pick: the server drives uvicorn from its own ``asyncio`` run, so uvicorn
    does not choose the loop. Per event (a provider read, a bus wake-up, an SSE write) it
    costs a fraction of the default loop's CPU. ``TURNSTREAM_LOOP=asyncio`` keeps the default."""
    if os.environ.get("TURNSTREAM_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def serve(*, host: str = "127.0.0.1", port: int = 8000, db: str | None = None, model: str | None = None) -> int:
    logs.setup(os.environ.get("TURNSTREAM_LOG_LEVEL", "INFO"), os.environ.get("TURNSTREAM_LOG_FORMAT", "json"))
    db = db or os.environ.get("TURNSTREAM_DB") or DEFAULT_DB
    demo = False
    if not model:
        model, demo = default_model()
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(_run(host, port, db, model, demo))
    except UsageError as exc:
        print(f"turnstream serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"turnstream serve: {exc}", file=sys.stderr)
        return 1
