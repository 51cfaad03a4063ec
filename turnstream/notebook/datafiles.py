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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..errors import AlreadyExists, FileTooLarge, InvalidValue
from . import files
from .config import FileLimits
from .files import FileInfo
from .graph import Graph
from .kernel import Kernel
from .model import Cell
from .persistence import FileStore

Describer = Callable[[Sequence[FileInfo], Sequence[bytes]], Awaitable[list[FileInfo]]]
"""Reads the shape of sniffed files in the sandbox (``describe.describe`` with a manager's limits)."""


class DataFiles:
    """The data files of every notebook of one manager."""

    def __init__(self, store: FileStore, limits: FileLimits, describer: Describer | None = None) -> None:
        self.store = store
        self.limits = limits
        self.describer = describer

    async def add(self, session_id: str, uploads: Sequence[tuple[str, bytes]]) -> list[FileInfo]:
        """Sniff every file against its name's format, describe them in the sandbox, then store
        them (each replacing a file of its name): nothing is stored unless all pass.
        ``InvalidValue`` (field ``files[i]``) for a bad name or content, ``FileTooLarge`` over a
        limit, ``AlreadyExists`` when two files would give the same variable."""
        stored = {f.name: f for f in await self.store.notebook_files(session_id)}
        infos: list[FileInfo] = []
        for i, (name, data) in enumerate(uploads):
            if len(data) > self.limits.file_bytes:
                raise FileTooLarge(f"{name} is {len(data)} bytes, over the limit of {self.limits.file_bytes} "
                                   "bytes for one data file", self.limits.file_bytes)
            try:
                infos.append(await asyncio.to_thread(files.sniff, name, data))
            except ValueError as exc:
                raise InvalidValue(f"files[{i}]", str(exc)) from None
        taken = {f.info.get("variable"): n for n, f in stored.items()}
        for info in infos:
            other = taken.get(info.variable)
            if other is not None and other != info.name:
                raise AlreadyExists(f"{info.name} would be loaded as {info.variable}, which {other} already is; "
                                    f"delete {other} or rename one of them")
            taken[info.variable] = info.name
        total = sum(f.size for n, f in stored.items() if n not in {i.name for i in infos})
        total += sum(i.bytes for i in infos)
        if total > self.limits.total_bytes:
            raise FileTooLarge(f"these files would take the notebook's files to {total} bytes, over their limit "
                               f"of {self.limits.total_bytes} bytes; delete a file first", self.limits.total_bytes)
        if self.describer is not None:
            infos = await self.describer(infos, [data for _, data in uploads])  # InvalidValue naming files[i]
        for (name, data), info in zip(uploads, infos, strict=True):
            await self.store.put_notebook_file(session_id, name, data, info.to_dict(),
                                               max_total=self.limits.total_bytes)
        return infos

    async def contents(self, session_id: str, names: Sequence[str], cap: int) -> dict[str, bytes]:
        """The bytes of the files ``names``, in order, while they come to at most ``cap``."""
        out: dict[str, bytes] = {}
        sizes = {f.name: f.size for f in await self.store.notebook_files(session_id)}
        for name in names:
            if sizes.get(name, cap + 1) > cap:
                continue
            data = await self.store.notebook_file_data(session_id, name)
            if data is not None:
                out[name] = data
                cap -= len(data)
        return out

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
