"""A stdio MCP server's standard error, as ``turnstream serve``'s own log records.

``turnstream serve`` writes one JSON object per line to its log (server/logs.py), and every
line passes the same redaction. An MCP server it starts writes whatever it likes to its
standard error; given serve's own, those lines landed in the log raw, breaking a collector that
reads JSON and bypassing the redaction. Each stdio server gets a pipe instead: its write end is
the server process's standard error, and a thread of ours reads the other end and logs each line
(logger ``turnstream.mcp.server``, INFO, the server's name in ``mcp_server`` and in the
message). Neither the ``mcp`` SDK nor the standard library turns a child's output into log
records, hence these few lines.

The terminal chat does not use this: there the lines go to a file of their own
(``chat/__init__.py``), out of the conversation's way; a library user's ``MCPToolset`` writes
where its ``stderr`` says (this process's standard error by default).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import BinaryIO, TextIO

log = logging.getLogger("turnstream.mcp.server")

LONGEST = 8192
"""A line longer than this (bytes) is logged in pieces of this size."""


def logged_stderr(server: str) -> TextIO:
    """A file to give MCP server ``server`` as its standard error; what it writes there is
    logged a line at a time. The reading thread ends when every copy of the write end is closed
    (the process has exited and the returned file is closed or collected)."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    threading.Thread(target=_log_lines, args=(reader, server), name=f"turnstream-mcp-stderr-{server}",
                     daemon=True).start()
    out = os.fdopen(write_fd, "w", encoding="utf-8")
    # Where MCPToolset's start-up error says its output went.
    out.buffer.raw.name = f"this server's log (logger turnstream.mcp.server, mcp_server {server!r})"  # type: ignore[attr-defined]
    return out


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but the tab: a carriage return or an escape sequence in a line would redraw an
operator's terminal in the text format (the JSON format escapes them anyway)."""


def _shown(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def _log_lines(reader: BinaryIO, server: str) -> None:
    with reader:
        while chunk := reader.readline(LONGEST):
            line = _CONTROL.sub(_shown, chunk.rstrip(b"\r\n").decode("utf-8", "replace"))
            if line.strip():
                log.info("[%s] %s", server, line, extra={"mcp_server": server})


__all__ = ["logged_stderr"]
