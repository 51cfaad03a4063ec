"""What running the project leaves in its folder is ignored by git: a newcomer's `git status` after
`turnstream serve` (SQLite beside the checkout) shows nothing of it."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.paths import REPO

LEFT_BY_SERVE = ["turnstream.db", "turnstream.db-wal", "turnstream.db-shm", "turnstream.db.key",
                 "turnstream.db.runners/0a1b2c3d.lock"]


@pytest.mark.parametrize("path", LEFT_BY_SERVE)
def test_what_serve_leaves_beside_its_database_is_ignored(path: str) -> None:
    result = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO, check=False, timeout=30)
    assert result.returncode == 0, f"{path} would show in git status"
