"""A turnstream cluster on one machine: ``make cluster``, ``tests/cluster`` and
``bench/cluster_bench.py`` all start it through this one module.

What it builds (every name carries the cluster's id, so two clusters, or a crashed one and
a new one, never share anything):

* a bridge ``tsc<id>br`` in the root network namespace, with the address ``10.A.B.1`` of a
  private /24 no interface of the machine uses; the machine does not forward packets
  (``ip_forward`` stays as it is, 0 here) and the namespaces get no default route, so
  traffic only goes between the bridge and the namespaces made here;
* a private PostgreSQL cluster (``tests/support/pg.py``'s ``Cluster``: ``initdb`` as the
  ``postgres`` user) listening on 127.0.0.1 and on the bridge address, with TCP keepalives
  short enough that the connections of a node cut off by a partition die within seconds
  (its liveness lock with them, so another node takes its turns over);
* per node, a network namespace ``tsc<id>n<i>`` joined to the bridge by a veth pair (its end
  is ``eth0`` there, address ``10.A.B.1<i>``), running ``turnstream serve`` on port 8000 of
  that address, reaching PostgreSQL over the bridge;
* HAProxy in the root namespace running ``deploy/haproxy.cfg`` itself (the addresses come
  from the environment the file names) plus a file of this cluster's own: each node alone
  on a loopback port (so a test, which may only connect to loopback, can send a request to
  a node of its choice), a statistics page, and, when a model provider on loopback is
  given, a relay to it on the bridge so the nodes can reach it.

A partition is a node's veth set down (``partition``/``heal``): it loses PostgreSQL and
HAProxy at once, as a machine whose cable is pulled would.

Command line (``make cluster`` / ``make cluster-down`` run these)::

    python -m tests.support.cluster up [--nodes 3] [--port 8000]
    python -m tests.support.cluster down
    python -m tests.support.cluster status

``up`` leaves the processes running and records them under ``/run/turnstream-cluster/<id>``;
``down`` stops them and removes the namespaces, links and files. Every ``up`` first removes
what a crashed run left behind (clusters whose creating process is gone and that were not
started to be kept).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.support.processes import alive, wait_for

REPO = Path(__file__).resolve().parents[2]
REGISTRY = Path("/run/turnstream-cluster")
HAPROXY_CFG = REPO / "deploy" / "haproxy.cfg"
LB_TURNS = 60
"""Turn streams HAProxy lets each node carry at once (``TURNSTREAM_LB_TURNS``): three nodes
share two cores on the machines this runs on."""
NODE_PORT = 8000
"""The port every node listens on, at its own address."""
READY_LINE = re.compile(r"turnstream serving .* on (http://[^/#\s]+)/ ")
PG_SETTINGS = {
    # 3 nodes use about 7 connections each (pool 4, liveness 1, bus 2) plus what the bus
    # opens per followed turn; the rest is headroom for admin and benches.
    "max_connections": "300",
    # a node cut off by a partition: its connections (and its liveness lock) are dropped
    # after 2 s of silence + 3 unanswered probes 1 s apart, or 5 s of unacknowledged data
    "tcp_keepalives_idle": "2", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "3",
    "tcp_user_timeout": "5000",
}


class ClusterError(RuntimeError):
    """Something the cluster needs is missing or did not start (said in words)."""


def sh(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command (no shell), its output captured; ``ClusterError`` with its stderr on failure."""
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _used_prefixes() -> set[str]:
    """The /24 prefixes (``10.A.B``) any interface of this machine has an address in."""
    out = sh("ip", "-4", "-o", "addr", "show").stdout
    return {".".join(a.split(".")[:3]) for a in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)", out)}


def _free_prefix() -> str:
    used = _used_prefixes()
    for _ in range(200):
        prefix = f"10.{secrets.choice(range(200, 250))}.{secrets.randbelow(256)}"
        if prefix not in used:
            return prefix
    raise ClusterError("no free 10.x.y.0/24 range for the cluster's network")


@dataclass
class Layout:
    """The names, addresses and ports of one cluster (what ``state.json`` records)."""

    id: str
    prefix: str
    nodes: int
    lb_port: int
    node_ports: list[int]
    stats_port: int
    pg_port: int
    provider_port: int
    owner: int
    """The process that made the cluster; 0 for one started to be kept (``make cluster``)."""
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return REGISTRY / self.id

    @property
    def bridge(self) -> str:
        return f"tsc{self.id}br"

    @property
    def bridge_ip(self) -> str:
        return f"{self.prefix}.1"

    def netns(self, i: int) -> str:
        return f"tsc{self.id}n{i}"

    def veth(self, i: int) -> str:
        """The root namespace's end of node ``i``'s link."""
        return f"tsc{self.id}h{i}"

    def node_ip(self, i: int) -> str:
        return f"{self.prefix}.{10 + i}"

    @property
    def db_url(self) -> str:
        """The database as the nodes reach it: over the bridge."""
        return f"postgresql://postgres@{self.bridge_ip}:{self.pg_port}/turnstream"

    @property
    def admin_url(self) -> str:
        """The same database from the root namespace, over loopback."""
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/turnstream"

    @property
    def lb_url(self) -> str:
        return f"http://127.0.0.1:{self.lb_port}"

    def node_url(self, i: int) -> str:
        """Node ``i`` alone, through its own HAProxy port on loopback."""
        return f"http://127.0.0.1:{self.node_ports[i - 1]}"

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / "state.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(self.root / "state.json")

    @classmethod
    def load(cls, cluster_id: str) -> Layout:
        return cls(**json.loads((REGISTRY / cluster_id / "state.json").read_text()))


class LocalCluster:
    """Build, drive and remove one cluster. ``up`` makes everything; the methods after it are
    what the tests do to it (kill a node, cut its link, restart PostgreSQL)."""

    def __init__(self, layout: Layout, *, env: dict[str, str] | None = None,
                 provider: str | None = None, keep: bool = False) -> None:
        self.layout = layout
        self.env = dict(env or {})
        """Extra environment of every node (model, tools, settings)."""
        self.provider = provider
        """A model provider on loopback (``http://127.0.0.1:PORT``) to relay to the nodes."""
        self.keep = keep
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.key = ""

    @classmethod
    def create(cls, *, nodes: int = 3, lb_port: int | None = None, node_ports: list[int] | None = None,
               cluster_id: str | None = None, env: dict[str, str] | None = None,
               provider: str | None = None, keep: bool = False) -> LocalCluster:
        layout = Layout(id=cluster_id or secrets.token_hex(3), prefix=_free_prefix(), nodes=nodes,
                        lb_port=lb_port or free_port(),
                        node_ports=node_ports or [free_port() for _ in range(nodes)],
                        stats_port=free_port(), pg_port=free_port(), provider_port=free_port(),
                        owner=0 if keep else os.getpid())
        return cls(layout, env=env, provider=provider, keep=keep)

    # the whole ------------------------------------------------------------------------------

    def up(self) -> None:
        """Everything, in order; on any failure what was made so far is removed."""
        require_tools()
        sweep_stale()
        self.layout.save()  # first: a crash from here on leaves a record ``sweep_stale`` finds
        try:
            self.network_up()
            self.postgres_up()
            for i in range(1, self.layout.nodes + 1):
                self.start_node(i)
            self.haproxy_up()
            self.wait_balanced()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop every process of the cluster and remove its namespaces, links and files."""
        lay = self.layout
        for name, pid in sorted(lay.pids.items(), key=lambda kv: kv[0] == "postgres"):
            if name == "postgres":
                continue
            _terminate(pid, self.procs.get(name))
        self._postgres_stop()
        for i in range(1, lay.nodes + 1):
            sh("ip", "netns", "del", lay.netns(i), check=False)
            sh("ip", "link", "del", lay.veth(i), check=False)
        sh("ip", "link", "del", lay.bridge, check=False)
        shutil.rmtree(lay.root, ignore_errors=True)

    def copy_logs(self, to: Path) -> None:
        to.mkdir(parents=True, exist_ok=True)
        root = self.layout.root
        for log in [root / "haproxy.log", root / "pg" / "log",
                    *(root / f"node{i}" / "server.log" for i in range(1, self.layout.nodes + 1))]:
            if log.exists():
                shutil.copy(log, to / str(log.relative_to(root)).replace("/", "-"))

    # network --------------------------------------------------------------------------------

    def network_up(self) -> None:
        lay = self.layout
        sh("ip", "link", "add", lay.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{lay.bridge_ip}/24", "dev", lay.bridge)
        sh("ip", "link", "set", lay.bridge, "up")
        for i in range(1, lay.nodes + 1):
            ns, host, peer = lay.netns(i), lay.veth(i), f"tsc{lay.id}p{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", host, "master", lay.bridge)
            sh("ip", "link", "set", host, "up")
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "-n", ns, "link", "set", peer, "name", "eth0")
            sh("ip", "-n", ns, "addr", "add", f"{lay.node_ip(i)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def partition(self, i: int) -> None:
        """Cut node ``i`` off: its link down, so it loses PostgreSQL and HAProxy at once."""
        sh("ip", "link", "set", self.layout.veth(i), "down")

    def heal(self, i: int) -> None:
        sh("ip", "link", "set", self.layout.veth(i), "up")

    # PostgreSQL -----------------------------------------------------------------------------

    def _pg(self) -> Any:
        from tests.support.pg import Cluster, pg_bindir

        lay = self.layout
        pg = Cluster(pg_bindir(), lay.root / "pg", lay.pg_port)
        settings = " ".join(f"-c {k}={v}" for k, v in PG_SETTINGS.items())
        pg.options = (f"-p {lay.pg_port} -k {pg.root} -c listen_addresses=127.0.0.1,{lay.bridge_ip} "
                      f"{settings}")
        return pg

    def postgres_up(self) -> None:
        lay = self.layout
        pg = self._pg()
        pg.root.mkdir(parents=True)
        lay.root.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(pg.root, "postgres")
        sh(*pg._as_owner, str(pg.bindir / "initdb"), "-D", str(pg.data), "-A", "trust", "-U", "postgres",
           "-E", "UTF8", "--no-sync", timeout=120)
        with (pg.data / "pg_hba.conf").open("a") as f:  # the nodes, over the bridge
            f.write(f"host all all {lay.prefix}.0/24 trust\n")
        pg.start()
        wait_for("PostgreSQL to accept connections", lambda: sh(
            str(pg.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(lay.pg_port), check=False
        ).returncode == 0, 30, error=ClusterError)
        sh(str(pg.bindir / "psql"), "-h", "127.0.0.1", "-p", str(lay.pg_port), "-U", "postgres", "-q",
           "-c", "CREATE DATABASE turnstream")
        lay.pids["postgres"] = int((pg.data / "postmaster.pid").read_text().split()[0])
        lay.save()

    def restart_postgres(self) -> None:
        """``pg_ctl restart -m fast``: every connection of every node is cut, the server back."""
        self._pg().pg_ctl("-m", "fast", "-o", self._pg().options, "restart")
        self.layout.pids["postgres"] = int((self._pg().data / "postmaster.pid").read_text().split()[0])
        self.layout.save()

    def _postgres_stop(self) -> None:
        pg = self._pg()
        if (pg.data / "postmaster.pid").exists():
            sh(*pg._as_owner, str(pg.bindir / "pg_ctl"), "-D", str(pg.data), "-m", "immediate", "-w", "stop",
               check=False)

    # nodes ----------------------------------------------------------------------------------

    def node_env(self) -> dict[str, str]:
        lay = self.layout
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TURNSTREAM_", "ANTHROPIC_", "OPENAI_")) or k.startswith("TURNSTREAM_TEST_")}
        env.update({"TURNSTREAM_KEY_FILE": str(lay.root / "login.key"), "TURNSTREAM_LOG_LEVEL": "INFO",
                    "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)})
        if self.provider:
            relay = f"http://{lay.bridge_ip}:{lay.provider_port}"
            env.update({"ANTHROPIC_BASE_URL": relay, "ANTHROPIC_API_KEY": "test-key",
                        "OPENAI_BASE_URL": relay + "/v1", "OPENAI_API_KEY": "test-key"})
        env.update(self.env)
        return env

    def start_node(self, i: int, *, wait: bool = True) -> None:
        """Start (or start again) node ``i`` in its namespace; returns once it printed its address."""
        lay = self.layout
        home = lay.root / f"node{i}"
        home.mkdir(exist_ok=True)
        out, log = home / "stdout", home / "server.log"
        with out.open("ab") as o, log.open("ab") as e:
            start = o.tell()
            proc = subprocess.Popen(
                ["ip", "netns", "exec", lay.netns(i), sys.executable, "-m", "turnstream.cli", "serve",
                 "--host", lay.node_ip(i), "--port", str(NODE_PORT), "--db", lay.db_url],
                stdin=subprocess.DEVNULL, stdout=o, stderr=e, cwd=home, env=self.node_env(),
                start_new_session=self.keep)
        self.procs[f"node{i}"] = proc
        lay.pids[f"node{i}"] = proc.pid
        lay.save()
        if not wait:
            return

        def ready() -> bool:
            if proc.poll() is not None:
                raise ClusterError(f"node {i} exited ({proc.returncode}): {log.read_text()[-3000:]}")
            with out.open("rb") as f:
                f.seek(start)
                return READY_LINE.search(f.read().decode(errors="replace")) is not None

        wait_for(f"node {i} to start", ready, 90, error=ClusterError)
        self.key = (lay.root / "login.key").read_text().strip()

    def node_pid(self, i: int) -> int:
        return self.layout.pids[f"node{i}"]

    def node_log(self, i: int) -> str:
        path = self.layout.root / f"node{i}" / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def signal_node(self, i: int, sig: int) -> None:
        os.kill(self.node_pid(i), sig)

    def kill_node(self, i: int) -> None:
        """``kill -9`` node ``i`` and reap it."""
        self.signal_node(i, signal.SIGKILL)
        self.wait_node_exit(i, 10)

    def wait_node_exit(self, i: int, timeout: float) -> int | None:
        proc = self.procs.get(f"node{i}")
        if proc is not None:
            return proc.wait(timeout)
        wait_for(f"node {i} to exit", lambda: not alive(self.node_pid(i)), timeout, error=ClusterError)
        return None

    # HAProxy --------------------------------------------------------------------------------

    def haproxy_env(self) -> dict[str, str]:
        lay = self.layout
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
               "TURNSTREAM_LB_BIND": f"127.0.0.1:{lay.lb_port}",
               "TURNSTREAM_LB_ERRORS": str(REPO / "deploy" / "errors"),
               # what one node carries here: three nodes share this machine's two cores
               "TURNSTREAM_LB_TURNS": os.environ.get("TURNSTREAM_LB_TURNS", str(LB_TURNS))}
        for i in range(1, 4):  # the file names three servers; those a smaller cluster lacks point
            # at a closed loopback port, so their health checks take them out at once
            env[f"TURNSTREAM_NODE{i}"] = f"{lay.node_ip(i)}:{NODE_PORT}" if i <= lay.nodes else "127.0.0.1:9"
        return env

    def local_cfg(self) -> str:
        """This cluster's own HAProxy sections: each node alone on loopback, the statistics
        page, the provider relay."""
        lay = self.layout
        parts = [f"listen stats\n    bind 127.0.0.1:{lay.stats_port}\n    stats enable\n    stats uri /stats\n"]
        for i in range(1, lay.nodes + 1):
            parts.append(f"listen node{i}\n    bind 127.0.0.1:{lay.node_ports[i - 1]}\n"
                         f"    server node{i} {lay.node_ip(i)}:{NODE_PORT}\n")
        if self.provider:
            target = self.provider.removeprefix("http://").rstrip("/")
            parts.append(f"listen provider\n    mode tcp\n    bind {lay.bridge_ip}:{lay.provider_port}\n"
                         f"    server provider {target}\n")
        return "\n".join(parts)

    def haproxy_up(self) -> None:
        lay = self.layout
        local = lay.root / "cluster.cfg"
        local.write_text(self.local_cfg())
        cfgs = ["-f", str(HAPROXY_CFG), "-f", str(local)]
        env = self.haproxy_env()
        check = subprocess.run([_haproxy(), "-c", "-q", *cfgs], capture_output=True, text=True, env=env, timeout=30)
        if check.returncode != 0:
            raise ClusterError(f"HAProxy refused its configuration: {check.stdout}{check.stderr}")
        log = (lay.root / "haproxy.log").open("ab")
        proc = subprocess.Popen([_haproxy(), "-db", *cfgs], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=env, start_new_session=self.keep)
        log.close()
        self.procs["haproxy"] = proc
        lay.pids["haproxy"] = proc.pid
        lay.save()

    def backend_status(self) -> dict[str, str]:
        """HAProxy's view of the balanced nodes: ``{"node1": "UP", …}`` (its statistics page)."""
        import urllib.request

        url = f"http://127.0.0.1:{self.layout.stats_port}/stats;csv"
        with urllib.request.urlopen(url, timeout=5) as r:  # loopback only
            text = r.read().decode()
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        return {row["svname"]: row["status"] for row in rows
                if row["pxname"] == "turnstream" and row["svname"] not in ("BACKEND", "FRONTEND")}

    def wait_balanced(self, nodes: list[int] | None = None, timeout: float = 30) -> None:
        """Until HAProxy's health checks (``GET /readyz``) find the given nodes (all) up."""
        want = {f"node{i}" for i in (nodes or range(1, self.layout.nodes + 1))}
        absent = {f"node{i}" for i in range(self.layout.nodes + 1, 4)}

        def up() -> bool:
            pid = self.layout.pids.get("haproxy", 0)
            if not alive(pid):
                log = self.layout.root / "haproxy.log"
                raise ClusterError(f"HAProxy exited: {log.read_text()[-2000:] if log.exists() else ''}")
            with contextlib.suppress(OSError):
                status = self.backend_status()
                return (all(status.get(n) == "UP" for n in want)
                        and all(status.get(n, "DOWN").startswith("DOWN") for n in absent))
            return False

        try:
            wait_for(f"HAProxy to find {sorted(want)} ready (GET /readyz)", up, timeout, error=ClusterError)
        except ClusterError as exc:
            with contextlib.suppress(OSError):
                exc.args = (f"{exc.args[0]}; HAProxy says {self.backend_status()}",)
            raise

    def wait_down(self, i: int, timeout: float = 30) -> None:
        """Until HAProxy's health checks have taken node ``i`` out of the rotation."""
        wait_for(f"HAProxy to take node{i} out", lambda: self.backend_status().get(f"node{i}", "").startswith(
            ("DOWN", "MAINT", "NOLB")), timeout, error=ClusterError)


def _terminate(pid: int, proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 15 s; only this cluster's own processes (by pid)."""
    if not alive(pid):
        if proc is not None:
            proc.poll()
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(10)


def _haproxy() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise ClusterError("HAProxy is not installed: run make cluster (it installs it) or apt-get install haproxy")
    return found


def require_tools() -> None:
    """Fail in words when the cluster cannot be built here: not root, no ``ip``, no HAProxy."""
    if os.geteuid() != 0:
        raise ClusterError("the cluster makes network namespaces and links: run it as root")
    if shutil.which("ip") is None:
        raise ClusterError("iproute2's ip is not installed (apt-get install iproute2)")
    _haproxy()


def sweep_stale() -> None:
    """Remove the clusters a crashed run left: recorded ones whose creating process is gone
    (not those started to be kept), and namespaces or links named like ours with no record."""
    recorded: set[str] = set()
    if REGISTRY.exists():
        for state in REGISTRY.glob("*/state.json"):
            try:
                layout = Layout.load(state.parent.name)
            except (OSError, ValueError, TypeError):
                shutil.rmtree(state.parent, ignore_errors=True)
                continue
            if layout.owner and not alive(layout.owner):
                LocalCluster(layout).down()
            else:
                recorded.add(layout.id)
    names = re.findall(r"^(tsc([0-9a-z]+)n\d+)\b", sh("ip", "netns", "list").stdout, re.M)
    for ns, cid in names:
        if cid not in recorded:
            sh("ip", "netns", "del", ns, check=False)
    links = re.findall(r"^\d+: (tsc([0-9a-z]+)(?:br|h\d+))[@:]", sh("ip", "-o", "link", "show").stdout, re.M)
    for link, cid in links:
        if cid not in recorded:
            sh("ip", "link", "del", link, check=False)


@contextlib.contextmanager
def running(logs_to: Path | None = None, **kw: Any) -> Iterator[LocalCluster]:
    """A cluster for the length of a ``with`` block (tests, benches): removed however it ends,
    its logs (nodes, HAProxy, PostgreSQL) first copied to ``logs_to`` when given."""
    cluster = LocalCluster.create(**kw)
    try:
        cluster.up()
        yield cluster
    finally:
        try:
            if logs_to is not None:
                cluster.copy_logs(logs_to)
        finally:
            cluster.down()


# command line -------------------------------------------------------------------------------

KEPT_ID = "mk"
"""The id of the cluster ``make cluster`` keeps running."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.support.cluster", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start the cluster and leave it running")
    up.add_argument("--nodes", type=int, default=3, choices=(1, 2, 3))
    up.add_argument("--port", type=int, default=8000, help="HAProxy's port on 127.0.0.1 (default 8000); "
                    "the nodes alone are on the next ones")
    up.add_argument("--model", default=None, help="the nodes' TURNSTREAM_MODEL (default: the offline demo)")
    sub.add_parser("down", help="stop it and remove everything it made")
    sub.add_parser("status", help="what runs, and HAProxy's view of the nodes")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            return _up(a.nodes, a.port, a.model)
        if a.cmd == "down":
            return _down()
        return _status()
    except ClusterError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1


def _up(nodes: int, port: int, model: str | None) -> int:
    if (REGISTRY / KEPT_ID / "state.json").exists():
        print("==> removing the cluster already running (as make cluster-down would)", file=sys.stderr)
        _down()
    env = {"TURNSTREAM_MODEL": model} if model else {}
    cluster = LocalCluster.create(nodes=nodes, lb_port=port, node_ports=[port + i for i in range(1, nodes + 1)],
                                  cluster_id=KEPT_ID, env=env, keep=True)
    print(f"==> network {cluster.layout.prefix}.0/24, PostgreSQL, {nodes} turnstream serve, HAProxy",
          file=sys.stderr)
    cluster.up()
    lay = cluster.layout
    if sys.stdout.isatty():  # as turnstream serve does: the key never goes to a file or a pipe
        print(f"turnstream cluster: {lay.lb_url}/#key={cluster.key}")
    else:
        print(f"turnstream cluster: {lay.lb_url}/ (its login key is in {lay.root / 'login.key'})")
    for i in range(1, nodes + 1):
        print(f"  node{i}: {lay.node_ip(i)}:{NODE_PORT} in netns {lay.netns(i)}, alone at {lay.node_url(i)}, "
              f"log {lay.root / f'node{i}' / 'server.log'}")
    print(f"  PostgreSQL: {lay.admin_url}; HAProxy statistics: http://127.0.0.1:{lay.stats_port}/stats")
    print("  make cluster-down removes it all")
    return 0


def _down() -> int:
    if not (REGISTRY / KEPT_ID / "state.json").exists():
        print("no cluster is running (nothing to remove)", file=sys.stderr)
        sweep_stale()
        return 0
    LocalCluster(Layout.load(KEPT_ID)).down()
    sweep_stale()
    print("cluster removed", file=sys.stderr)
    return 0


def _status() -> int:
    if not (REGISTRY / KEPT_ID / "state.json").exists():
        print("no cluster is running")
        return 1
    cluster = LocalCluster(Layout.load(KEPT_ID))
    for name, pid in cluster.layout.pids.items():
        print(f"{name}: pid {pid} {'running' if alive(pid) else 'gone'}")
    with contextlib.suppress(OSError):
        print("HAProxy:", ", ".join(f"{k} {v}" for k, v in cluster.backend_status().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
