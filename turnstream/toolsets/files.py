"""Read-only file tools confined to one directory: ``list_directory`` and ``read_file``.

Confinement works on real paths: the requested path is joined to the root (or taken as is
when absolute), every symlink is followed, and the result must have the root's path
components as its leading components. Comparing components rather than string prefixes is
what keeps ``/srv/root-evil`` out when the root is ``/srv/root``. A refused path raises
``PathOutsideRootError``; the tool executor hands that to the model as an error result.

Known limit: the check and the open are two system calls, so a process that can swap a
symlink inside the root between them could win the race. These tools guard against a model
wandering off, not against a hostile local user.
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

from ..errors import NotATextFileError, PathOutsideRootError, ToolInputError
from ..tools.tool import Tool, tool

MAX_READ_BYTES = 64 * 1024
"""``read_file`` returns at most this many bytes of a file and says how much it left out."""
MAX_ENTRIES = 500
"""``list_directory`` shows at most this many entries and says how many it left out."""
_SNIFF_BYTES = 8192


def _is_within(path: Path, root: Path) -> bool:
    return path.parts[: len(root.parts)] == root.parts


def _confine(root: Path, requested: str) -> Path:
    """The real path of ``requested`` (relative to ``root``), or an error if it leaves ``root``."""
    if "\x00" in requested:
        raise ToolInputError("path contains a NUL character")
    candidate = Path(requested)
    if not candidate.is_absolute():
        candidate = root / candidate
    real = Path(os.path.realpath(candidate))
    if not _is_within(real, root):
        raise PathOutsideRootError(
            f"'{requested}' is outside the allowed directory; only paths inside the chat's root can be used"
        )
    return real


def _display(path: Path, root: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return "." if rel == "." else rel


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _describe_entry(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return f"{entry.name}@  (symlink)"
        if entry.is_dir(follow_symlinks=False):
            return f"{entry.name}/"
        if entry.is_file(follow_symlinks=False):
            return f"{entry.name}  {_human_size(entry.stat(follow_symlinks=False).st_size)}"
    except OSError:
        return f"{entry.name}  (unreadable)"
    return f"{entry.name}  (special file)"


def _list_directory(root: Path, path: str) -> str:
    target = _confine(root, path)
    if not target.exists():
        raise FileNotFoundError(f"'{path}' does not exist")
    if not target.is_dir():
        raise NotADirectoryError(f"'{path}' is a file, not a directory; use read_file to read it")
    with os.scandir(target) as it:
        entries = sorted(it, key=lambda e: (e.name.lower(), e.name))
    shown = [_describe_entry(e) for e in entries[:MAX_ENTRIES]]
    count = "1 entry" if len(entries) == 1 else f"{len(entries)} entries"
    header = f"{_display(target, root)}/ ({count})"
    if not entries:
        return f"{header}\n(empty directory)"
    lines = [header, *shown]
    if len(entries) > MAX_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_ENTRIES} more entries not shown]")
    return "\n".join(lines)


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    try:
        # A multi-byte character may be cut at the end of the sample; tolerate exactly that.
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 3
    return False


def _read_file(root: Path, path: str) -> str:
    target = _confine(root, path)
    if not target.exists():
        raise FileNotFoundError(f"'{path}' does not exist")
    if target.is_dir():
        raise IsADirectoryError(f"'{path}' is a directory; use list_directory to see what it holds")
    # O_NONBLOCK: opening a named pipe must not wait for a writer; fstat then refuses it.
    fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotATextFileError(f"'{path}' is not a regular file")
        data = f.read(MAX_READ_BYTES)
    if _looks_binary(data[:_SNIFF_BYTES]):
        raise NotATextFileError(
            f"'{path}' looks like a binary file ({_human_size(st.st_size)}); only text files can be read"
        )
    left_out = st.st_size - len(data)
    # When the file was cut, the cut may split a character: the incremental decoder holds back
    # a trailing partial sequence instead of turning it into a replacement character.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=left_out <= 0)
    if left_out > 0:
        text += (
            f"\n\n[truncated: showed the first {len(data):,} of {st.st_size:,} bytes; "
            f"{left_out:,} bytes left out]"
        )
    return text


def make_file_tools(root: Path) -> list[Tool]:
    """``list_directory`` and ``read_file``, both confined to ``root`` (which must exist)."""
    real_root = Path(os.path.realpath(root))
    if not real_root.is_dir():
        raise NotADirectoryError(f"root {root} is not a directory")

    @tool(timeout=10, idempotent=True)
    def list_directory(path: str = ".") -> str:
        """List the entries of a directory: sorted, directories end in '/', files show their size.

        Args:
            path: Directory to list, relative to the root; '.' is the root itself.
        """
        return _list_directory(real_root, path)

    @tool(timeout=10, idempotent=True)
    def read_file(path: str) -> str:
        """Read a UTF-8 text file; files over 64 KB are cut short with a note.

        Args:
            path: File to read, relative to the root.
        """
        return _read_file(real_root, path)

    return [list_directory, read_file]
