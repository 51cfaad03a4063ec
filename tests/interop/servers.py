"""Third-party servers for the interop suite: their virtual environments and their processes.

Each Python server runs from its own virtual environment, made from a hash-checked lock file
under ``requirements/``; each Node.js server from its own ``node_modules``, made by ``npm ci``
from the ``package.json`` and ``package-lock.json`` in its folder here. Both are kept under
``$TURNSTREAM_INTEROP_HOME`` (default ``.interop/`` at the repository root, ignored by git) and
made again only when their lock changes: the lock's checksum is stamped into them once the
install succeeded.

Every process listens on 127.0.0.1 only, on a free port, and is stopped at the end of the
session. Start-up is awaited by polling its health route with a deadline.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.mock_provider import free_port
from tests.support.paths import REPO

HERE = Path(__file__).resolve().parent
HOME = Path(os.environ.get("TURNSTREAM_INTEROP_HOME") or REPO / ".interop")
LITELLM_KEY = "sk-interop-7f3c9a1e5b2d4c6a8e0f1a3b5c7d9e1f"
"""The proxy's master key (LiteLLM refuses to start without one); it guards nothing but this run."""
TURNSTREAM = Path(sys.executable).parent / "turnstream"


def ensure_venv(name: str) -> Path:
    """The environment for ``requirements/<name>.txt``, made (once per lock) with
    ``pip install --require-hashes --no-deps``; returns its ``bin`` directory."""
    lock = HERE / "requirements" / f"{name}.txt"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    venv = HOME / name
    stamp = venv / f".installed-{digest}"
    if stamp.exists():
        return venv / "bin"
    HOME.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--require-hashes", "--no-deps", "-r", str(lock)], check=True)
    stamp.write_text(f"installed from {lock.name} in {time.monotonic() - started:.1f} s\n")
    print(f"\n[interop] made {venv} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return venv / "bin"


def ensure_node_modules(name: str) -> Path:
    """``<name>/package.json`` and its ``package-lock.json`` installed (once per lock) with
    ``npm ci --ignore-scripts`` under the suite's home: every package pinned by the lock and
    checked against its sha512, no install script run. Returns the ``node_modules`` directory."""
    src = HERE / name
    lock = src / "package-lock.json"
    digest = hashlib.sha256((src / "package.json").read_bytes() + lock.read_bytes()).hexdigest()[:16]
    home = HOME / name
    stamp = home / f".installed-{digest}"
    if stamp.exists():
        return home / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is needed to install {name} (the interop suite runs it with Node.js)")
    started = time.monotonic()
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    for f in ("package.json", "package-lock.json"):
        shutil.copyfile(src / f, home / f)
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], cwd=home, check=True)
    stamp.write_text(f"installed from {name}/package-lock.json in {time.monotonic() - started:.1f} s\n")
    print(f"\n[interop] made {home} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return home / "node_modules"


def wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{url} did not come up (exit code {proc.poll()}):\n{tail}")
        time.sleep(0.1)


@contextmanager
def process(args: list[str], *, env: dict[str, str], health: str, workdir: Path,
            timeout: float = 90.0) -> Iterator[None]:
    """Run ``args`` (output to ``workdir/server.log``) until the block ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=workdir, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until_up(health, proc, log, timeout)
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@contextmanager
def mock_provider(workdir: Path) -> Iterator[str]:
    """``turnstream mock-provider`` of this checkout; yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with process([str(TURNSTREAM), "mock-provider", "--host", "127.0.0.1", "--port", str(port)], env={},
                 health=url + "/health", workdir=workdir, timeout=30):
        yield url


LITELLM_CONFIG = """\
# Written by tests/interop/servers.py. "openai/<name>" reaches the mock's Chat Completions and
# Responses routes, "anthropic/<name>" its Messages route; <name> is the mock's scenario.
model_list:
  - model_name: "openai/*"
    litellm_params:
      model: "openai/*"
      api_base: "{mock}/v1"
      api_key: "mock-key"
  - model_name: "anthropic/*"
    litellm_params:
      model: "anthropic/*"
      api_base: "{mock}"
      api_key: "mock-key"
litellm_settings:
  num_retries: 0
  request_timeout: 60
general_settings:
  master_key: "{key}"
"""


@contextmanager
def litellm_proxy(mock: str) -> Iterator[str]:
    """LiteLLM's proxy in front of the mock; yields its base URL (without ``/v1``)."""
    bin_dir = ensure_venv("litellm")
    work = HOME / "run" / "litellm"
    work.mkdir(parents=True, exist_ok=True)
    config = work / "config.yaml"
    config.write_text(LITELLM_CONFIG.format(mock=mock, key=LITELLM_KEY))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False", "DISABLE_ADMIN_UI": "True",
           "LITELLM_LOG": "ERROR", "NO_PROXY": "127.0.0.1,localhost"}
    with process([str(bin_dir / "litellm"), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
                 env=env, health=url + "/health/liveliness", workdir=work):
        yield url


@contextmanager
def open_responses_server(mock: str) -> Iterator[str]:
    """open-responses-server (a Responses-to-Chat bridge) in front of the mock's Chat route;
    yields its base URL (its routes have no ``/v1``)."""
    bin_dir = ensure_venv("open-responses-server")
    work = HOME / "run" / "open-responses-server"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"OPENAI_BASE_URL_INTERNAL": mock, "OPENAI_API_KEY": "mock-key",
           "MCP_SERVERS_CONFIG_PATH": str(work / "no-mcp-servers.json"), "NO_PROXY": "127.0.0.1,localhost"}
    with process([str(bin_dir / "uvicorn"), "open_responses_server.server_entrypoint:app", "--host", "127.0.0.1",
                  "--port", str(port)], env=env, health=url + "/health", workdir=work):
        yield url


@contextmanager
def portkey_gateway() -> Iterator[str]:
    """Portkey's AI gateway (Node.js); yields its base URL (without ``/v1``). It has no
    configuration of its own: each request names its backend in ``x-portkey-*`` headers."""
    modules = ensure_node_modules("portkey")
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is needed to run Portkey's gateway")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [node, "--require", str(HERE / "portkey" / "loopback.cjs"),
            str(modules / "@portkey-ai" / "gateway" / "build" / "start-server.js"), f"--port={port}", "--headless"]
    with process(args, env={"NO_PROXY": "127.0.0.1,localhost"}, health=url + "/", workdir=HOME / "run" / "portkey"):
        yield url


def everything_server() -> list[str]:
    """The command line that starts the MCP reference server ``@modelcontextprotocol/server-everything``
    (Node.js, pinned in ``everything/package-lock.json``) over stdio: what an ``mcpServers`` entry's
    ``command`` and ``args`` say. turnstream starts it, as it starts any stdio server."""
    modules = ensure_node_modules("everything")
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is needed to run @modelcontextprotocol/server-everything")
    return [node, str(modules / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"), "stdio"]
