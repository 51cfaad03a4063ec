"""Liveness of the processes sharing a SQLite file: a lock file per runner.

While its store is open, each runner holds an exclusive ``flock`` on
``<database>.runners/<runner id>.lock``. The kernel drops the lock the moment the process
dies (``kill -9`` included), so another process that can take the lock knows, without
waiting for any timeout, that the runner is gone. The PostgreSQL store does the same with a
session advisory lock (``pg.LivenessLock``). A private database (``:memory:``) has no
folder: it is visible to one process only, whose runner is alive by definition.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from pathlib import Path

_SAFE = re.compile(r"[A-Za-z0-9_-]{1,100}")


class FileLocks:
    def __init__(self, folder: Path | None, runner_id: str) -> None:
        self.folder = folder
        self.runner_id = runner_id
        self._fd: int | None = None

    def _path(self, runner_id: str) -> Path:
        assert self.folder is not None
        name = runner_id if _SAFE.fullmatch(runner_id) else hashlib.sha256(runner_id.encode()).hexdigest()[:32]
        return self.folder / f"{name}.lock"

    def hold(self) -> None:
        """Take this runner's lock (at the store's open)."""
        if self.folder is None or self._fd is not None:
            return
        for attempt in range(3):  # another process may remove the folder as it empties it
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(self._path(self.runner_id), os.O_RDWR | os.O_CREAT, 0o600)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Give the lock up and remove its file (at the store's close)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._path(self.runner_id))
        os.close(fd)  # closing drops the flock
        if self.folder is not None:
            with contextlib.suppress(OSError):  # not empty: other runners are open
                self.folder.rmdir()

    def alive(self, runner_id: str) -> bool:
        """Whether ``runner_id``'s process still holds its lock."""
        if self.folder is None or runner_id == self.runner_id:
            return True
        try:
            fd = os.open(self._path(runner_id), os.O_RDWR)
        except FileNotFoundError:
            return False  # it closed its store, or never had a lock: nothing holds the turn
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def forget(self, runner_id: str) -> None:
        """Remove a dead runner's lock file."""
        if self.folder is not None and runner_id != self.runner_id:
            with contextlib.suppress(OSError):
                os.unlink(self._path(runner_id))


__all__ = ["FileLocks"]
