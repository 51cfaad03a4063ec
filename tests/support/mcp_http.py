"""The test MCP server (``tests/support/mcp_server.py``) run over streamable HTTP as a process of
its own, which a test can kill and start again on the same URL."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from tests.support.mock_provider import free_port
from tests.support.processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
SERVER = ["-m", "tests.support.mcp_server"]


class HttpServer:
    """The test MCP server as a uvicorn process on one port, its stderr in ``log``; it can be
    killed and started again on the same port (the same URL)."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self._err: IO[Any] | None = None

    def _up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def start(self) -> None:
        if self._err is not None:
            self._err.close()
        self._err = self.log.open("a")
        self.proc = subprocess.Popen([sys.executable, *SERVER, "http", str(self.port)], cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=self._err)
        wait_for("the MCP HTTP server", self._up, 30)

    def kill(self) -> None:
        """SIGKILL: the process ends at once, whatever it was doing."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        if self._err is not None:
            self._err.close()
