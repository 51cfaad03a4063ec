"""The attacks of issue 12, each run as the cell code of one user (alice) on a real server
shared with another user (bob), and each refused. After every attack bob's kernel is checked:
the same kernel, his variable and his file still there."""

from __future__ import annotations

import ast
import errno
import hashlib
import os
import platform
import signal
import socket
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.integration.sandbox.cells import BOB_SECRET, CANARY_KEY, Bob, Notebook, host_ip, text_of
from tests.support.paths import REPO
from tests.support.processes import kernel_processes
from tests.support.server import Server
from turnstream.notebook.sandbox import find_runtime
from turnstream.notebook.seccomp import SYSCALLS


def _db_path(server: Server) -> str:
    return server.db.removeprefix("sqlite:///")


def _users(server: Server) -> dict[str, str]:
    with sqlite3.connect(_db_path(server)) as con:
        return dict(con.execute("SELECT name, key_hash FROM users").fetchall())


def test_the_database_the_key_file_and_the_conversations_are_out_of_reach(
        server: Server, workdir: Path, bob: Bob, bob_key: str) -> None:
    db = _db_path(server)
    key_file = str(workdir / "server.key")
    before = _users(server)
    assert before["bob"] == hashlib.sha256(bob_key.encode()).hexdigest()
    attack = f"""
import os, sqlite3
found = {{p: os.path.exists(p) for p in [{db!r}, {os.path.dirname(db)!r}, {key_file!r}]}}
tampered = []
for uri in ['file:{db}?mode=rw', {db!r}]:
    try:
        con = sqlite3.connect(uri, uri=uri.startswith('file:'))
        con.execute("UPDATE users SET key_hash = 'attacker' WHERE name = 'bob'")
        con.commit()
        tampered.append('updated')
    except Exception as e:
        tampered.append(type(e).__name__)
leaks = []
for top in ['/etc', '/home', '/tmp', '/opt', '/root', '/work', '/run', '/var', '/srv', '/mnt']:
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x not in ('site-packages', 'lib-dynload', 'python3.11')]
        for name in files:
            try:
                with open(os.path.join(d, name), 'rb') as f:
                    data = f.read(4 << 20)
            except OSError:
                continue
            if b'{BOB_SECRET}' in data or b'{before["bob"]}' in data:
                leaks.append(os.path.join(d, name))
(found, tampered, leaks)
"""
    result = Notebook(server).run(attack)
    assert result["status"] == "success", result
    found, tampered, leaks = ast.literal_eval(result["outputs"][-1]["text"])
    assert found == {db: False, os.path.dirname(db): False, key_file: False}
    assert "updated" not in tampered and tampered, tampered
    assert leaks == []
    assert _users(server) == before  # bob's key hash never changed
    with server.client(bob_key) as c:
        assert c.get("/api/sessions").status_code == 200  # and bob still logs in with his key
    bob.assert_intact()


def test_the_server_environment_and_command_line_are_out_of_reach(server: Server, bob: Bob) -> None:
    attack = f"""
seen = {{}}
for pid in [p for p in __import__('os').listdir('/proc') if p.isdigit()] + [str({server.proc.pid})]:
    for name in ('environ', 'cmdline'):
        try:
            with open('/proc/%s/%s' % (pid, name), 'rb') as f:
                seen[pid + '/' + name] = f.read().decode(errors='replace')
        except OSError as e:
            seen[pid + '/' + name] = type(e).__name__
seen
"""
    result = Notebook(server).run(attack)
    assert result["status"] == "success", result
    seen = ast.literal_eval(result["outputs"][-1]["text"])
    assert seen[f"{server.proc.pid}/environ"] == "FileNotFoundError"
    assert seen[f"{server.proc.pid}/cmdline"] == "FileNotFoundError"
    pids = {int(k.split("/")[0]) for k in seen} - {server.proc.pid}
    assert pids <= {1, 2, 3}  # bubblewrap's init and the kernel itself: nothing of the host
    everything = text_of(result)
    for secret in (CANARY_KEY, _db_path(server), "--db", "TURNSTREAM_"):
        assert secret not in everything
    bob.assert_intact()


def test_other_kernels_and_the_server_survive_kill_attempts(server: Server, bob: Bob) -> None:
    bob_pids = kernel_processes(server.proc.pid)
    assert bob_pids
    attack = f"""
import os, signal
for pid in [-1, {server.proc.pid}, *{sorted(bob_pids)!r}, *range(1, 70000)]:
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
'still here'
"""
    Notebook(server).run(attack)
    assert server.proc.poll() is None
    with server.client() as c:
        assert c.get("/healthz").status_code == 200
    assert bob_pids <= kernel_processes(server.proc.pid)  # the very same processes
    bob.assert_intact()


def test_a_fork_bomb_stays_inside_its_kernel(server: Server, bob: Bob) -> None:
    attack = """
import os, time
n, err = 0, None
while True:
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    n += 1
(n, err)
"""
    before = kernel_processes(server.proc.pid)
    forked, err = ast.literal_eval(Notebook(server).value(attack))
    assert err == errno.EAGAIN
    assert 100 < forked <= 256  # KernelLimits.processes; the machine's own limit is far above
    assert len(kernel_processes(server.proc.pid) - before) == 1  # the kernel: its sleepers ended with the cell
    assert bob.notebook.value("__import__('subprocess').run(['true']).returncode") == "0"
    bob.assert_intact()


def test_a_memory_hog_stays_inside_its_kernel(server: Server, bob: Bob) -> None:
    attack = """
import os, time
try:
    hog = bytearray(8 * 1024**3)
    single = 'allocated'
except MemoryError:
    single = 'MemoryError'
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(400 * 1024**2)
            time.sleep(5)
            os._exit(0)
        except MemoryError:
            os._exit(3)
    kids.append(pid)
(single, [os.waitpid(p, 0)[1] for p in kids])
"""
    assert any("limits by cgroup" in line for line in server.output), server.output  # a tree-wide limit
    single, statuses = ast.literal_eval(Notebook(server).value(attack))
    assert single == "MemoryError"  # one process: its address space is capped
    # Four processes of 400 MiB do not fit in the kernel's 1 GiB: the cgroup kills some.
    assert sum(1 for s in statuses if s == 0) <= 2
    assert any(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL for s in statuses), statuses
    with server.client() as c:
        assert c.get("/healthz").status_code == 200
    bob.assert_intact()


def test_there_is_no_network(server: Server, bob: Bob) -> None:
    listener = socket.create_server(("0.0.0.0", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    server_port = int(server.url.rsplit(":", 1)[1])
    targets = [("127.0.0.1", server_port), ("127.0.0.1", 5432), ("127.0.0.1", port), (host_ip(), port),
               ("1.1.1.1", 53)]
    attack = f"""
import socket
got = {{}}
for host, port in {targets!r}:
    try:
        socket.create_connection((host, port), timeout=3).close()
        got[host + ':' + str(port)] = 'connected'
    except OSError as e:
        got[host + ':' + str(port)] = type(e).__name__
try:
    socket.getaddrinfo('example.com', 443)
    got['dns'] = 'resolved'
except OSError as e:
    got['dns'] = type(e).__name__
got
"""
    try:
        got = ast.literal_eval(Notebook(server).value(attack))
        assert "connected" not in got.values() and "resolved" not in got.values(), got
        try:
            listener.accept()
            raise AssertionError("a kernel reached a socket of the host")
        except BlockingIOError:
            pass
    finally:
        listener.close()
    bob.assert_intact()


def test_the_filesystem_shows_the_runtime_read_only_and_a_capped_working_directory(
        server: Server, bob: Bob) -> None:
    runtime = find_runtime(sys.executable)  # what the server's kernels run
    home = Path.home()
    shown_in_home = {Path(p).relative_to(home).parts[0] for p in (runtime.executable, *runtime.stdlib, *runtime.site)
                     if Path(p).is_relative_to(home)}
    shown_in_repo = {Path(p).relative_to(REPO).parts[0] for p in runtime.site if Path(p).is_relative_to(REPO)}
    site = runtime.site[0]
    attack = f"""
import errno, os
listing = {{d: sorted(os.listdir(d)) if os.path.isdir(d) else None for d in [{str(home)!r}, {str(REPO)!r}]}}
writes = {{}}
for p in ['/x', '/usr/x', '/etc/passwd', '/opt/turnstream/child.py', {site!r} + '/pandas/__init__.py',
          {site!r} + '/evil.pth']:
    try:
        with open(p, 'a') as f:
            f.write('import os')
        writes[p] = 'written'
    except OSError as e:
        writes[p] = errno.errorcode[e.errno]
try:
    with open('fill', 'wb') as f:
        for _ in range(600):
            f.write(b'x' * 1024**2)
    disk = 'written'
except OSError as e:
    disk = errno.errorcode[e.errno]
os.remove('fill')
(listing, writes, disk, os.getcwd(), os.listdir('.'))
"""
    listing, writes, disk, cwd, own = ast.literal_eval(Notebook(server).value(attack))
    assert set(listing[str(home)] or []) <= shown_in_home  # only the runtime's own directory, if any
    assert set(listing[str(REPO)] or []) <= shown_in_repo  # the project: only the virtualenv's packages
    assert "written" not in writes.values(), writes
    assert disk == "ENOSPC"  # the working directory's size cap (512 MiB)
    assert cwd == "/home/notebook" and own == []  # bob's bob.txt is in his own working directory
    bob.assert_intact()


def test_a_flood_on_the_protocol_pipe_is_cut_off(server: Server, bob: Bob) -> None:
    attack = """
import os
for fd in range(3, 64):
    try:
        for _ in range(40):
            os.write(fd, b'x' * 1024**2)
    except OSError:
        pass
'not reached'
"""
    result = Notebook(server).run(attack)
    assert result["status"] == "error"
    assert result["outputs"][-1]["error"].startswith("OutputTooLarge:"), result
    bob.assert_intact()


def test_the_kernel_cannot_reach_the_riskiest_system_calls(server: Server, bob: Bob) -> None:
    numbers = SYSCALLS[platform.machine()][1]
    attack = f"""
import ctypes, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    rc = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return 'ok' if rc >= 0 else os.strerror(ctypes.get_errno())
got = {{name: call(nr, *args) for name, nr, args in [
    ('unshare', {numbers["unshare"]}, [0x10000000]),
    ('bpf', {numbers["bpf"]}, [0, 0, 0]),
    ('userfaultfd', {numbers["userfaultfd"]}, [0]),
    ('io_uring_setup', {numbers["io_uring_setup"]}, [1, 0]),
    ('keyctl', {numbers["keyctl"]}, [0, 0]),
    ('mount', {numbers["mount"]}, [0, 0, 0, 0, 0]),
    ('clone3', {numbers["clone3"]}, [0, 0]),
]}}
got['unshare -U'] = subprocess.run(['unshare', '-U', '-r', 'true'], capture_output=True, text=True).stderr.strip()
t = threading.Thread(target=lambda: None)
t.start()
t.join()
got['thread and subprocess'] = subprocess.run(['true']).returncode
got
"""
    got = ast.literal_eval(Notebook(server).value(attack))
    refused = {k: v for k, v in got.items() if k not in ("clone3", "unshare -U", "thread and subprocess")}
    assert set(refused.values()) == {"Operation not permitted"}, got
    assert got["clone3"] == "Function not implemented"  # so the C library falls back to clone
    assert "Operation not permitted" in got["unshare -U"]
    assert got["thread and subprocess"] == 0  # what cells need still works
    bob.assert_intact()


FORGER = """
import json, os, sys

def request_id():
    # the id of the run under way, read from the kernel's own frames
    frame = sys._getframe()
    while frame is not None:
        msg = frame.f_locals.get('msg')
        if isinstance(msg, dict) and msg.get('op') == 'run':
            return msg['id']
        frame = frame.f_back

def forge(line):
    # one line on every descriptor the cell may write to: the protocol pipe among them
    for fd in range(3, 64):
        try:
            os.write(fd, line + b'\\n')
        except OSError:
            pass

def reply(**fields):
    return json.dumps({'id': request_id(), 'status': 'success', 'outputs': [], **fields}).encode()
"""
FORGERIES = {
    "nested past any recursion limit": "forge(b'[' * 100_000)",
    "not an object": "forge(b'[1, 2, 3]')",
    "not JSON": "forge(b'{\"id\": ')",
    "NaN": "forge(reply().replace(b'[]', b'[NaN]'))",
    "another request's id": "forge(json.dumps({'id': -1, 'status': 'success', 'outputs': []}).encode())",
    "a status that is none": "forge(reply(status={'ok': True}))",
    "outputs that are no list": "forge(reply(outputs='all fine'))",
    "an output that is no object": "forge(reply(outputs=[42]))",
    "an output of an unknown type": "forge(reply(outputs=[{'type': 'script', 'text': 'alert(1)'}]))",
    "a table with words for its shape": "forge(reply(outputs=[{'type': 'table', 'html': '', 'text': '', "
                                        "'rows': 'many', 'columns': True}]))",
}


@pytest.mark.parametrize("forgery", FORGERIES, ids=list(FORGERIES))
def test_a_forged_reply_on_the_protocol_pipe_ends_the_run_as_an_error(server: Server, bob: Bob,
                                                                      forgery: str) -> None:
    notebook = Notebook(server)
    with notebook.client() as c:
        cells = f"/api/sessions/{notebook.id}/notebook/cells"
        forged = c.post(cells, json={"code": FORGER + FORGERIES[forgery]}).json()
        r = c.post(f"{cells}/{forged['id']}/run")
        assert r.status_code == 200, r.text  # the route answers: no exception reached it
        cell = r.json()["cell"]
        assert cell["status"] == "error", cell
        [error] = cell["outputs"]
        assert error["ename"] == "KernelProtocolError", error
        assert "written to the kernel's own channel" in error["evalue"]
        assert c.get("/healthz").status_code == 200
        after = c.post(cells, json={"code": "6 * 7"}).json()  # a fresh kernel runs the next cell
        assert c.post(f"{cells}/{after['id']}/run").json()["cell"]["outputs"] == [{"type": "text", "text": "42"}]
    bob.assert_intact()


def test_a_well_formed_forgery_is_the_cells_own_output_and_the_real_reply_is_refused_next(
        server: Server, bob: Bob) -> None:
    """A forged reply with the right id and shape is accepted as the cell's outputs (they are the
    cell's to choose), made storable; the kernel's real reply then answers the wrong request and
    the next run says so, and the one after runs in a fresh kernel."""
    notebook = Notebook(server)
    figure = "{'data': [{'x': [1, 2**70], 'name': chr(0xdc80)}], 'layout': {}}"
    result = notebook.run(FORGER + f"forge(reply(outputs=[{{'type': 'plotly', 'figure': {figure}}}]))")
    assert result["status"] == "success", result
    [saved] = notebook.state()["cells"][-1]["outputs"]  # stored, and sent over the WebSocket
    assert saved["figure"]["data"][0] == {"x": [1, float(2**70)], "name": "\\udc80"}
    stale = notebook.run("1 + 1")
    assert stale["status"] == "error" and stale["outputs"][-1]["error"].startswith("KernelProtocolError:"), stale
    assert notebook.value("1 + 1") == "2"
    bob.assert_intact()
