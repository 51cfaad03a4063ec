"""The kernel child process: runs cells in one namespace and answers over JSON lines.

Started by ``launch.launch`` as ``python -I [-S] child.py CONFIG`` (CONFIG is JSON, see
``launch.child_config``), inside the sandbox or bare. Before it says ready it drops to its
own uid (a root server's sandbox), sets its rlimits, lowers its priority and adds the
site-packages it was given. It imports only the standard library and its sibling
``sqltext.py`` at start; pandas, DuckDB and Plotly load on first use, so a kernel starts in
well under a second.

In the sandbox, every process a cell started is killed when the cell ends (the PID namespace
holds only this kernel, bubblewrap's init and what cells started): nothing runs between cells.

Protocol (one JSON object per line; the child owns private copies of the original stdin and
stdout, and fds 0/1 are pointed elsewhere so user code can neither read nor corrupt them):

* child → parent at start: ``{"op": "ready", "pid": int}``
* parent → child, each answered by one reply line in order:
  ``{"id": n, "op": "run", "language": "python"|"sql", "code": str, "filename": str,
  "result_name": str|null, "load": [{"name", "file", "format", "sha"}]}`` (``load``: data
  files to read into the namespace first, see ``files.py``), ``{"id": n, "op": "put_file",
  "name": str, "data": base64}``, ``{"id": n, "op": "remove_file", "name": str}``,
  ``{"id": n, "op": "ping"}``.
* parent → child, never answered: ``{"op": "interrupt", "id": n}``: stop run ``n`` (a
  ``KeyboardInterrupt`` in the cell, which ends it with an error output). A reader thread takes
  it while the main thread runs the cell; one that comes before its run starts stops it at once.
* child → parent: ``{"id": n, "status": "success"|"error", "outputs": [output, ...]}``
  with outputs as described in ``model``.

Why one module of this size: it is the program that runs inside the sandbox, loaded by path
with only the standard library and its two siblings; every file more is one more bind into
every sandbox, and the protocol, the namespace and the reader thread share its state.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import importlib.util
import io
import json
import linecache
import os
import queue
import resource
import signal
import site
import sys
import threading
import traceback
from types import ModuleType, TracebackType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import files, sqltext
else:

    def _load_sibling(name: str) -> ModuleType:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"_turnstream_kernel_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    sqltext, files = (_load_sibling(n) if not __package__ else importlib.import_module(f"{__package__}.{n}")
                      for n in ("sqltext", "files"))

MAX_STREAM_CHARS = 20_000
MAX_REPR_CHARS = 10_000
TABLE_ROWS = 50
TABLE_COLS = 30
PREVIEW_ROWS = 20
THIS_FILE = os.path.abspath(__file__)


def human_size(n: float) -> str:
    """``n`` bytes in words: 512 KiB, 16 MiB, 1.5 GiB."""
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} GiB"


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return f"{text[:head]}\n… [{len(text) - limit} characters cut] …\n{text[-tail:]}"


class Control:
    """What the reader thread and the main thread share: which run is under way, which runs
    were interrupted, whether user code runs now (only then does SIGINT raise)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: Any = None
        """The id of the run in progress, or None."""
        self.stopped: set[Any] = set()
        """Ids of runs interrupted before they started."""
        self.user_code = False
        self.main = threading.main_thread().ident

    def interrupt(self, run_id: Any) -> None:
        with self.lock:
            if run_id is not None and run_id == self.current:
                assert self.main is not None
                signal.pthread_kill(self.main, signal.SIGINT)  # wakes a sleeping cell too
            else:
                self.stopped.add(run_id)

    def begin(self, run_id: Any) -> bool:
        """Mark ``run_id`` as started; False when it was interrupted already."""
        with self.lock:
            self.current = run_id
            return run_id not in self.stopped

    def end(self) -> None:
        with self.lock:
            self.current = None
            self.stopped.clear()  # ids only rise: an older one can never start again

    def on_sigint(self, signum: int, frame: Any) -> None:
        if self.user_code:
            raise KeyboardInterrupt


CONTROL = Control()


def interrupted_error() -> dict[str, Any]:
    return {"type": "error", "ename": "KeyboardInterrupt", "evalue": "interrupted before it started",
            "traceback": ""}


class Runner:
    """Holds the namespace (and a DuckDB connection, once a SQL cell needs one)."""

    def __init__(self, memory_bytes: int | None = None, threads: int | None = None) -> None:
        self.ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.memory_bytes = memory_bytes
        self.threads = threads
        self._duck: Any = None
        self.loaded: dict[str, tuple[str, Any]] = {}
        """Variable -> (sha256 of the file, the object read from it)."""

    def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        out, err = io.StringIO(), io.StringIO()
        outputs: list[dict[str, Any]] = []
        status = "success"
        half: str | None = None
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                CONTROL.user_code = True
                try:
                    self._load(msg.get("load") or [])
                    if msg.get("language") == "sql":
                        value = self._run_sql(msg["code"], msg.get("result_name"))
                    else:
                        value = self._run_python(msg["code"], msg.get("filename") or "<cell>")
                    result = self._display(value)
                finally:
                    CONTROL.user_code = False
        except BaseException as exc:  # the cell failed; the kernel keeps going
            CONTROL.user_code = False
            status = "error"
            result = self._error(exc)
            half = half_imported(exc) if isinstance(exc, KeyboardInterrupt) else None
        for name, buf in (("stdout", out), ("stderr", err)):
            text = buf.getvalue()
            if text:
                outputs.append({"type": name, "text": _trim(text, MAX_STREAM_CHARS)})
        if result is not None:
            outputs.append(result)
        reply: dict[str, Any] = {"status": status, "outputs": outputs}
        if status == "error" and half:
            reply["half_imported"] = half
        return reply

    def _load(self, specs: list[dict[str, Any]]) -> None:
        """Read the data files the cell uses into the namespace: once, and again only when the
        file changed and the name still holds what was read from the old one."""
        for spec in specs:
            name, sha = spec["name"], spec["sha"]
            had = self.loaded.get(name)
            if name in self.ns and (had is None or had[0] == sha or self.ns[name] is not had[1]):
                continue
            import pandas as pd

            env: dict[str, Any] = {"pd": pd}
            if spec["format"] == "parquet":
                import duckdb

                env["duckdb"] = duckdb
            try:
                value = eval(files.load_expr(spec["format"], spec["file"]), env)
            except Exception as exc:
                exc.add_note(f"(while reading the data file {spec['file']} as {name})")
                raise
            self.ns[name] = value
            self.loaded[name] = (sha, value)

    def _run_python(self, code: str, filename: str) -> Any:
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename, "exec")
        last: ast.expr | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
            tail = tree.body.pop()
            assert isinstance(tail, ast.Expr)
            last = tail.value
        exec(compile(tree, filename, "exec"), self.ns)
        if last is None:
            return None
        return eval(compile(ast.Expression(last), filename, "eval"), self.ns)

    def _run_sql(self, code: str, result_name: str | None) -> Any:
        import duckdb
        import pandas as pd

        if self._duck is None:
            self._duck = duckdb.connect(":memory:")
            if self.memory_bytes:
                self._duck.execute(f"SET memory_limit = '{self.memory_bytes // 2 // 2**20}MB'")
            if self.threads:
                self._duck.execute(f"SET threads = {int(self.threads)}")
        con = self._duck
        statement, params = sqltext.bind(code, self.ns)
        registered = []
        for name in sqltext.table_refs(code):
            value = self.ns.get(name)
            if isinstance(value, pd.DataFrame):
                con.register(name, value)
                registered.append(name)
        try:
            cursor = con.execute(statement, params)
            frame = _whole_numbers(cursor.df(), cursor.description) if cursor.description else None
        finally:
            for name in registered:
                con.unregister(name)
        if result_name and frame is not None:
            self.ns[result_name] = frame
        return frame

    def _display(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        module = type(value).__module__ or ""
        if module.startswith("plotly.") and hasattr(value, "to_json"):
            return {"type": "plotly", "figure": json.loads(value.to_json())}
        if "pandas" in sys.modules:
            import pandas as pd

            if isinstance(value, pd.Series):
                value = value.to_frame()
            if isinstance(value, pd.DataFrame):
                rows, cols = value.shape
                return {
                    "type": "table",
                    "html": value.to_html(max_rows=TABLE_ROWS, max_cols=TABLE_COLS, border=0),
                    "text": _trim(value.to_string(max_rows=PREVIEW_ROWS, max_cols=TABLE_COLS),
                                  MAX_REPR_CHARS),
                    "rows": int(rows),
                    "columns": int(cols),
                }
        return {"type": "text", "text": _trim(repr(value), MAX_REPR_CHARS)}

    def _error(self, exc: BaseException) -> dict[str, Any]:
        tb: TracebackType | None = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == THIS_FILE:
            tb = tb.tb_next  # keep the user's frames only
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        evalue = str(exc)
        missing = getattr(exc, "filename", None) if isinstance(exc, FileNotFoundError) else None
        if isinstance(missing, str) and os.path.dirname(missing) in ("", "."):
            # a data file of the notebook that is not there (a notebook imported without it)
            evalue += (f". Upload {os.path.basename(missing)} to the notebook (Upload data, or drop it on the "
                       "notebook), then run the cell again.")
        return {"type": "error", "ename": type(exc).__name__, "evalue": evalue,
                "traceback": _trim(text, MAX_STREAM_CHARS)}


def half_imported(exc: BaseException) -> str | None:
    """The module whose import ``exc`` (an interrupt) stopped halfway, or None.

    Module-level code runs only while its module is imported, so a ``<module>`` frame of any
    module but the cell's own (``__main__``) in the traceback means an import was under way.
    Its submodules that did finish stay in ``sys.modules`` bound to the half-made parent, so
    importing it again in this process can fail in odd ways (pandas: ``partially initialized
    module``). Importlib's own frames are mostly cut from tracebacks; when one is left (the
    interrupt landed in importlib itself) it names the module too. The outermost one counts."""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") and isinstance(frame.f_locals.get("name"), str):
            return str(frame.f_locals["name"])
        module = frame.f_globals.get("__name__")
        if code.co_name == "<module>" and isinstance(module, str) and module != "__main__":
            return module
        tb = tb.tb_next
    return None


def _whole_numbers(frame: Any, description: list[Any]) -> Any:
    """DuckDB's SUM of an integer column is a HUGEINT, which reaches pandas as a float (``260.0``);
    such a column goes back to integers when every value fits in 64 bits."""

    for name, kind, *_ in description:
        column = frame.get(name)
        if str(kind) not in ("HUGEINT", "UHUGEINT") or column is None or column.dtype.kind != "f":
            continue
        values = column.dropna()
        whole = values.empty or bool((values == values.round()).all() and values.abs().max() < 2**63)
        if whole:
            frame[name] = column.astype("Int64" if column.isna().any() else "int64")
    return frame


def _private_pipes() -> tuple[IO[bytes], IO[bytes]]:
    """Keep the protocol on private fds; fds 0, 1 and 2 then read nothing and write nowhere
    (what a cell prints goes through ``sys.stdout``; C-level writes are dropped)."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    return proto_in, proto_out


def _send(out: IO[bytes], msg: dict[str, Any]) -> None:
    out.write(json.dumps(msg, default=str).encode() + b"\n")


def _drop_to(uid: int) -> None:
    """Become ``uid`` (group too, no supplementary groups) for good, with no capability left."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid):
        raise SystemExit("the kernel could not drop its privileges")
    with open("/proc/self/status") as f:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in f) if k.startswith("Cap")}
    if int(caps.get("CapEff", "1"), 16) or int(caps.get("CapPrm", "1"), 16):
        raise SystemExit("the kernel still holds capabilities after dropping its privileges")


def _limit(memory: int | None, processes: int | None) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    os.nice(10)  # the server's own threads come first


def _end_strays() -> None:
    """Kill every other process in the sandbox (``kill(-1)`` spares init and the caller) and
    reap the ones that were this process's children."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _reply_bytes(reply: dict[str, Any], limit: int | None) -> bytes:
    try:
        data = json.dumps(reply, default=str).encode() + b"\n"
    except (TypeError, ValueError, MemoryError) as exc:
        return _error_reply(reply.get("id"), type(exc).__name__, f"could not send output: {exc}")
    if limit and len(data) > limit:
        return _error_reply(reply.get("id"), "OutputTooLarge",
                            f"The cell's outputs came to {human_size(len(data))}, more than the "
                            f"{human_size(limit)} a cell may return. Show less (a summary, .head(), "
                            "fewer points), or write the data to a file in the working directory.")
    return data


def _error_reply(msg_id: Any, ename: str, evalue: str) -> bytes:
    reply = {"id": msg_id, "status": "error",
             "outputs": [{"type": "error", "ename": ename, "evalue": evalue, "traceback": ""}]}
    return json.dumps(reply).encode() + b"\n"


def _put_file(msg: dict[str, Any]) -> dict[str, Any]:
    """Write a data file into the working directory, read-only (its durable copy is the server's)."""
    name = str(msg["name"])
    files.check_name(name)
    tmp = f".{name}.part"
    with contextlib.suppress(FileNotFoundError):
        os.chmod(name, 0o600)
    with open(tmp, "wb") as f:
        f.write(base64.b64decode(msg["data"]))
    os.chmod(tmp, 0o444)
    os.replace(tmp, name)
    return {"status": "success", "outputs": []}


def _remove_file(msg: dict[str, Any]) -> dict[str, Any]:
    name = str(msg["name"])
    files.check_name(name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name)
    return {"status": "success", "outputs": []}


def _read_messages(proto_in: IO[bytes], inbox: queue.Queue[dict[str, Any] | None]) -> None:
    """The reader thread: interrupts act at once, everything else waits its turn in ``inbox``."""
    try:
        for raw in proto_in:
            msg = json.loads(raw)
            if msg.get("op") == "interrupt":
                CONTROL.interrupt(msg.get("id"))
            else:
                inbox.put(msg)
    finally:
        inbox.put(None)


def _handle(runner: Runner, msg: dict[str, Any]) -> dict[str, Any]:
    op = msg.get("op")
    try:
        if op == "run":
            if not CONTROL.begin(msg.get("id")):
                return {"status": "error", "outputs": [interrupted_error()]}
            try:
                return runner.run(msg)
            except KeyboardInterrupt:  # came between the cell's end and here
                return {"status": "error", "outputs": [interrupted_error()]}
            finally:
                CONTROL.end()
        if op == "put_file":
            return _put_file(msg)
        if op == "remove_file":
            return _remove_file(msg)
    except Exception as exc:
        return {"status": "error", "outputs": [runner._error(exc)]}
    return {"status": "success", "outputs": []}


def main(argv: list[str]) -> int:
    config: dict[str, Any] = json.loads(argv[0]) if argv else {}
    # kill(-1) is safe only in the sandbox's own PID namespace, where this process's parent is
    # that namespace's init (pid 1); outside, it would hit every process of the user.
    sandboxed = bool(config.get("reap")) and os.getppid() == 1
    if config.get("uid") is not None:
        _drop_to(int(config["uid"]))
    _limit(config.get("memory"), config.get("processes") if sandboxed else None)
    for path in config.get("site") or ():
        site.addsitedir(path)
    signal.signal(signal.SIGINT, CONTROL.on_sigint)
    proto_in, proto_out = _private_pipes()
    runner = Runner(config.get("memory"), config.get("threads"))
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_read_messages, args=(proto_in, inbox), daemon=True, name="protocol").start()
    _send(proto_out, {"op": "ready", "pid": os.getpid()})
    while (msg := inbox.get()) is not None:
        reply = _handle(runner, msg)
        if sandboxed:
            _end_strays()
        reply["id"] = msg.get("id")
        proto_out.write(_reply_bytes(reply, config.get("output_bytes")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
