"""``turnstream serve``: open the store, recover, make sure a user can log in, serve.

It runs with one ``Settings`` object (``turnstream.settings``: the environment, read once,
with the command line's flags over it).

The login key: keys are stored hashed, so the login key is kept in a key file readable only
by its owner (``<database file>.key`` for SQLite, else under ``~/.config/turnstream/``). On
first start — no key file, or its key no longer valid — a local user is created and its key
written there. The address is printed with the key in its fragment only when stdout is a
terminal (a person reads it, as Jupyter prints its token); anywhere else stdout is a log
(systemd, docker), so the address is printed without the key and with the key file's path.
``--port 0`` picks a free port; the address printed is the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import itertools
import logging
import os
import signal
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

from ..bus import Bus
from ..errors import StoreError, UsageError, UserExists
from ..settings import SERVER_DEMO, Settings
from ..store import Store, open_bus, open_store
from . import logs
from .hardening import header_deadline_protocol
from .state import AppState

GC_GEN0 = 20_000
"""Allocations between young collections while serving (Python's default is 700)."""

if TYPE_CHECKING:
    from ..notebook import FileLimits, KernelLimits, NotebookManager, PoolLimits, SandboxConfig

log = logging.getLogger("turnstream.server")


def key_file(settings: Settings) -> Path:
    """Where the login key is kept: ``TURNSTREAM_KEY_FILE``, else beside the SQLite file,
    else under ``~/.config/turnstream/`` (named by a hash of the database URL)."""
    if settings.key_file is not None:
        return settings.key_file
    db = settings.db
    if db.kind == "sqlite" and db.persistent:
        return Path(db.target + ".key")
    digest = hashlib.sha256(db.url.encode()).hexdigest()[:16]
    return Path.home() / ".config" / "turnstream" / f"{digest}.key"


async def login_key(store: Store, path: Path, *, persistent: bool) -> tuple[str, bool]:
    """The login key, and whether a user was created for it. The key file always ends up
    holding it, readable by its owner only (a file an older version or a person left readable
    by others is tightened); only a persistent database's key is reused at the next start."""
    if persistent and path.is_file():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            os.chmod(path, mode & 0o700)
            log.warning("the key file %s was open to other users (mode %o); it is owner-only now", path, mode)
        key = path.read_text().strip()
        if key and await store.user_by_key(key) is not None:
            return key, False
    key = await _new_local_user(store)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # A new file (mkstemp makes it 0600) put in the old one's place: a process holding the old
    # file open, when it was readable by others, does not see the new key.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return key, True


def address_line(model: str, address: str, key: str, path: Path, *, terminal: bool) -> str:
    """What ``serve`` prints once it listens: the address with the key for a person at a
    terminal; elsewhere (a log) the address and where the key is, never the key."""
    if terminal:
        return f"turnstream serving {model} on {address}/#key={key}"
    return (f"turnstream serving {model} on {address}/ (sign in by adding #key= and the login key kept in "
            f"{path} to that address; it is not printed here, where the output may be a log)")


async def _new_local_user(store: Store) -> str:
    """A user for the login key: ``local``, or ``local-2``, ``local-3``… when the key file of an
    earlier one was lost (its key cannot be recovered: only its hash is stored)."""
    for n in itertools.count(1):
        try:
            _, key = await store.create_user("local" if n == 1 else f"local-{n}")
        except UserExists:
            continue
        return key
    raise AssertionError("unreachable")


async def _heartbeat(store: Store, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        try:
            await store.heartbeat()
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)


async def _run(settings: Settings, logging_to: logs.LogChoice) -> int:
    from .app import create_app

    db, model, demo, host = settings.db, settings.model, settings.demo, settings.host
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, settings.port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    real_port = sock.getsockname()[1]
    settings = replace(settings, port=real_port)  # the WebSocket's own origins need the real port
    store = open_store(db)
    await store.open()
    bus = open_bus(db)
    state: AppState | None = None
    beat: asyncio.Task[None] | None = None
    try:
        await bus.start()
        state = AppState(settings=settings, store=store, bus=bus, notebooks=_notebooks(store, bus, settings))
        state.provider(model)  # fail now, not on the first message, when the model is unusable
        taken = await state.turns.sweep()  # turns a dead process left running: continued (or ended) here
        if taken:
            log.info("took over %d turn(s) of a stopped process", len(taken), extra={"turns": taken})
        state.turns.start_sweeping()
        kept_in = key_file(settings)
        key, created = await login_key(store, kept_in, persistent=db.persistent)
        beat = asyncio.create_task(_heartbeat(store, settings.heartbeat_interval))

        shown = f"[{host}]" if ":" in host else host
        if demo:
            print(f"No model configured (--model, or ANTHROPIC_API_KEY / OPENAI_API_KEY): running the demo "
                  f"model {model}.", flush=True)
        if created:
            print("Created a local user; its key is kept in the key file"
                  + (" for the next start." if db.persistent else "."), flush=True)
        print(address_line(model, f"http://{shown}:{real_port}", key, kept_in, terminal=sys.stdout.isatty()),
              flush=True)
        if logging_to.console:
            hint = "Open that address in a browser (it signs you in); Ctrl-C stops the server."
            if not logging_to.access:
                hint += " Requests are not logged on a terminal (TURNSTREAM_ACCESS_LOG=on logs them)."
            print(hint, flush=True)

        app = create_app(state)
        if settings.gc == "tuned":
            _tune_gc()
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=3, ws_ping_interval=20,
                                http=header_deadline_protocol(settings.header_timeout))
        server = DrainingServer(config, state)
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


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown (SIGTERM, SIGINT) first stops taking turns, lets the
    running ones finish within the grace period, leaves the rest to another process
    (``TurnManager.drain``), and tells every open stream to reconnect (``Bus.end_streams``),
    before uvicorn closes the connections."""

    def __init__(self, config: uvicorn.Config, state: AppState) -> None:
        super().__init__(config)
        self.state = state

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Still listening while the turns drain: ``/readyz`` answers 503 (a load balancer stops
        # sending work), a new turn gets 503 ``shutting_down`` (retried elsewhere), and the
        # running turns' streams can still be followed here.
        await self.state.turns.drain(self.state.settings.shutdown_grace)
        self.state.bus.end_streams()
        await super().shutdown(sockets)


def _tune_gc() -> None:
    """Keep the cyclic garbage collector's pauses short while turns stream.

    Measured at 1,000 concurrent turns (bench/server_bench.py): with the defaults, six full
    collections paused the event loop for up to 94 ms each (every event in flight waited that
    long), and young collections ran 771 times. ``gc.freeze()`` moves what start-up built
    (modules, pydantic schemas, the app: most of the heap) out of every later collection,
    and a larger first threshold makes young collections rarer; the turns' own objects are
    still collected. ``TURNSTREAM_GC=default`` leaves the collector as Python sets it."""
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


def _notebooks(store: Store, bus: Bus, settings: Settings) -> NotebookManager | None:
    try:
        from ..notebook import NotebookManager
    except ImportError:  # the notebook extra is not installed
        return None

    async def broadcast(session_id: str, message: dict[str, Any]) -> None:
        # Other processes get the change without the cell's outputs when it is too large
        # for a notification; they read the notebook for them.
        slim = dict(message)
        cell = slim.get("cell")
        if isinstance(cell, dict):
            slim["cell"] = {k: v for k, v in cell.items() if k != "outputs"}
        slim["truncated"] = True
        bus.publish_message(session_id, message, fallback=slim)

    sandbox, limits, pool, files = notebook_config(settings)
    manager = NotebookManager(store, on_change=broadcast, sandbox=sandbox, limits=limits, pool=pool, files=files)
    print(manager.probe_sandbox().summary(), flush=True)  # a warning when cells run unsandboxed or cannot run
    return manager


def notebook_config(settings: Settings) -> tuple[SandboxConfig, KernelLimits, PoolLimits, FileLimits]:
    """The notebooks' settings (their defaults: ``turnstream/notebook/config.py``)."""
    from ..notebook import FileLimits, KernelLimits, PoolLimits, SandboxConfig

    sandbox = SandboxConfig(mode="bubblewrap" if settings.notebook_sandbox else "off",
                            network=settings.notebook_network)
    limits = (KernelLimits() if settings.kernel_memory_mb is None
              else KernelLimits(memory_bytes=settings.kernel_memory_mb * 1024**2))
    pool = PoolLimits(max_kernels=settings.max_kernels)
    if settings.kernel_idle_timeout is not None:
        pool = PoolLimits(max_kernels=settings.max_kernels, idle_timeout=settings.kernel_idle_timeout or None)
    files = FileLimits()
    if settings.notebook_file_mb is not None or settings.notebook_files_mb is not None:
        files = FileLimits(file_bytes=(settings.notebook_file_mb or files.file_bytes // 1024**2) * 1024**2,
                           total_bytes=(settings.notebook_files_mb or files.total_bytes // 1024**2) * 1024**2)
    return sandbox, limits, pool, files


def _loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (``uvicorn[standard]`` brings it), as uvicorn
    itself would pick: the server drives uvicorn from its own ``asyncio`` run, so uvicorn
    does not choose the loop. Per event (a provider read, a bus wake-up, an SSE write) it
    costs a fraction of the default loop's CPU. ``TURNSTREAM_LOOP=asyncio`` keeps the default."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def serve(settings: Settings) -> int:
    """Run the server until SIGINT or SIGTERM; the exit status."""
    choice = logs.setup(settings.log_level, settings.log_format, settings.access_log)
    model, demo = settings.default_model(SERVER_DEMO)
    settings = replace(settings, model=model, demo=demo)
    try:
        with asyncio.Runner(loop_factory=_loop_factory(settings.loop)) as runner:
            return runner.run(_run(settings, choice))
    except UsageError as exc:
        print(f"turnstream serve: {exc}", file=sys.stderr)
        return 2
    except (StoreError, OSError) as exc:  # the database cannot be opened, the port is taken
        print(f"turnstream serve: {exc}", file=sys.stderr)
        return 1
