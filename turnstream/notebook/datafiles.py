"""A notebook's data files on the server side: checked and capped on the way in, kept in the
store (the one place every server process reaches), written into a kernel's working directory
before its next run, and read into the namespace when a cell uses their variable.

Why the store and not a folder: a kernel's working directory is a tmpfs that dies with the
kernel, and with several server processes on one PostgreSQL database the next run of a
notebook may happen in any of them. Before each run the manager compares the store's list
(names and hashes, no bytes) with what the kernel holds and sends only what changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..errors import AlreadyExists, FileTooLarge, InvalidValue
from . import files
from .config import FileLimits
from .files import FileInfo
from .graph import Graph
from .kernel import Kernel
from .model import Cell
from .persistence import FileStore


class DataFiles:
    """The data files of every notebook of one manager."""

    def __init__(self, store: FileStore, limits: FileLimits) -> None:
        self.store = store
        self.limits = limits

    async def add(self, session_id: str, name: str, data: bytes) -> FileInfo:
        """Check ``data`` against its name's format and store it (replacing a file of that
        name). ``InvalidValue`` (field ``files``) for a bad name or content, ``FileTooLarge``
        over a limit, ``AlreadyExists`` when another file already has its variable."""
        if len(data) > self.limits.file_bytes:
            raise FileTooLarge(f"{name} is {len(data)} bytes, over the limit of {self.limits.file_bytes} bytes "
                               "for one data file", self.limits.file_bytes)
        try:
            info = await asyncio.to_thread(files.check, name, data)
        except ValueError as exc:
            raise InvalidValue("files", str(exc)) from None
        for other in await self.store.notebook_files(session_id):
            if other.name != name and other.info.get("variable") == info.variable:
                raise AlreadyExists(f"{name} would be loaded as {info.variable}, which {other.name} already is; "
                                    f"delete {other.name} or rename one of them")
        await self.store.put_notebook_file(session_id, name, data, info.to_dict(), max_total=self.limits.total_bytes)
        return info

    async def infos(self, session_id: str) -> list[FileInfo]:
        return [FileInfo.from_dict(f.info) for f in await self.store.notebook_files(session_id)]

    async def remove(self, session_id: str, name: str) -> bool:
        try:
            files.check_name(name)
        except ValueError as exc:
            raise InvalidValue("name", str(exc)) from None
        return await self.store.delete_notebook_file(session_id, name)

    async def sync(self, session_id: str, kernel: Kernel, have: dict[str, str]) -> list[FileInfo]:
        """Make the kernel's files the store's: write what is new or changed, remove what is
        gone. ``have`` (name -> sha256 the kernel holds) is updated in place."""
        stored = await self.store.notebook_files(session_id)
        for name in [n for n in have if n not in {f.name for f in stored}]:
            await kernel.remove_file(name)
            del have[name]
        for f in stored:
            if have.get(f.name) != f.sha256:
                data = await self.store.notebook_file_data(session_id, f.name)
                if data is None:  # deleted meanwhile
                    continue
                await kernel.put_file(f.name, data)
                have[f.name] = f.sha256
        return [FileInfo.from_dict(f.info) for f in stored]


def load_specs(cells: Sequence[Cell], graph: Graph, cell_id: str, infos: Sequence[FileInfo]) -> list[dict[str, Any]]:
    """The data files cell ``cell_id`` reads: those whose variable it uses while no cell
    above it defines that name."""
    by_var = {f.variable: f for f in infos}
    if not by_var:
        return []
    above: set[str] = set()
    for cell in cells:
        if cell.id == cell_id:
            break
        above |= graph.names[cell.id].defines
    return [{"name": v, "file": by_var[v].name, "format": by_var[v].format, "sha": by_var[v].sha256}
            for v in sorted(graph.names[cell_id].uses) if v in by_var and v not in above]


def users_of(cells: Sequence[Cell], graph: Graph, variable: str) -> list[str]:
    """Ids of the cells that read ``variable`` from a data file."""
    above: set[str] = set()
    out = []
    for cell in cells:
        names = graph.names[cell.id]
        if variable in names.uses and variable not in above:
            out.append(cell.id)
        above |= names.defines
    return out


__all__ = ["DataFiles", "load_specs", "users_of"]
