"""The login key ``turnstream serve`` prints: kept in its key file, and made again (for a new
user, since user names are unique) when that file is lost."""

from __future__ import annotations

from pathlib import Path

from turnstream.server.main import login_key
from turnstream.store.memory import MemoryStore


async def test_a_lost_key_file_gets_a_new_user_next_to_the_old_one(tmp_path: Path) -> None:
    store = MemoryStore()
    path = tmp_path / "server.key"
    first, created = await login_key(store, path, persistent=True)
    assert created and path.read_text().strip() == first
    again, created = await login_key(store, path, persistent=True)
    assert (again, created) == (first, False)  # the key file's key still works
    path.unlink()
    second, created = await login_key(store, path, persistent=True)
    third, _ = await login_key(store, tmp_path / "other.key", persistent=True)
    users = [await store.user_by_key(k) for k in (first, second, third)]
    assert [u.name for u in users if u is not None] == ["local", "local-2", "local-3"]
