"""Where notebook documents and data files live: a ``Store`` does (it has these methods), and
``InMemoryNotebooks`` does for a library user or a test without one."""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..errors import FileTooLarge, StaleNotebook
from ..store.protocol import NotebookFile

T = TypeVar("T")


class NotebookPersistence(Protocol):
    """Where notebook documents live. A ``Store`` with these two methods satisfies it."""

    def load_notebook(self, session_id: str) -> dict[str, Any] | Awaitable[dict[str, Any] | None] | None:
        """The saved document, or None when the session has no notebook yet."""
        ...

    def save_notebook(self, session_id: str, doc: dict[str, Any], *,
                      base: int | None = None) -> int | Awaitable[int]:
        """Save the whole document; return its new version number. ``base``: only if the
        saved version is still this one (0: none saved yet), else ``StaleNotebook``."""
        ...


@runtime_checkable
class FileStore(Protocol):
    """Where a notebook's data files live (the ``Store`` methods of the same names)."""

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile: ...

    async def notebook_files(self, session_id: str) -> list[NotebookFile]: ...

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None: ...

    async def delete_notebook_file(self, session_id: str, name: str) -> bool: ...


class InMemoryNotebooks:
    """``NotebookPersistence`` and ``FileStore`` in dicts (documents JSON round-tripped, so a
    non-JSON doc fails loudly)."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.files: dict[str, dict[str, tuple[NotebookFile, bytes]]] = {}

    def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        raw = self.docs.get(session_id)
        return None if raw is None else dict(json.loads(raw))

    def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        if base is not None and base != self.versions.get(session_id, 0):
            raise StaleNotebook(session_id, base)
        version = self.versions.get(session_id, 0) + 1
        self.docs[session_id] = json.dumps({**doc, "version": version})
        self.versions[session_id] = version
        return version

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        files = self.files.setdefault(session_id, {})
        others = sum(f.size for n, (f, _) in files.items() if n != name)
        if max_total is not None and others + len(data) > max_total:
            raise FileTooLarge(f"{name} would take this notebook's files past {max_total} bytes", max_total)
        record = NotebookFile(name, len(data), hashlib.sha256(data).hexdigest(), dict(info), time.time())
        files[name] = (record, bytes(data))
        return record

    async def notebook_files(self, session_id: str) -> list[NotebookFile]:
        return [f for _, (f, _) in sorted(self.files.get(session_id, {}).items())]

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None:
        found = self.files.get(session_id, {}).get(name)
        return found[1] if found else None

    async def delete_notebook_file(self, session_id: str, name: str) -> bool:
        return self.files.get(session_id, {}).pop(name, None) is not None


async def resolve(value: T | Awaitable[T]) -> T:
    """The value of a persistence call that may be sync or async."""
    if inspect.isawaitable(value):
        return await value
    return value


__all__ = ["FileStore", "InMemoryNotebooks", "NotebookPersistence", "resolve"]
