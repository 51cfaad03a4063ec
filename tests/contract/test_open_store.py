"""open_store: one setting (--db / TURNSTREAM_DB) names every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstream.errors import UsageError
from turnstream.store import MemoryStore, open_store
from turnstream.store.postgres import PostgresStore
from turnstream.store.sqlite import SQLiteStore


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:///chat.db", "chat.db"),
    ("sqlite:///./data/chat.db", "./data/chat.db"),
    ("sqlite:////var/lib/turnstream.db", "/var/lib/turnstream.db"),
    ("  SQLITE:///:memory:  ", ":memory:"),
])
def test_sqlite_urls(url: str, path: str) -> None:
    store = open_store(url)
    assert isinstance(store, SQLiteStore) and store.path == path


@pytest.mark.parametrize("url", ["postgresql://u@db:5432/ts", "postgres://u@db/ts", "postgresql+psycopg://u@db/ts"])
def test_postgres_urls(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresStore) and store.url.startswith("postgresql://u@db")


def test_memory_url() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


def test_default_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNSTREAM_DB", "memory://")
    assert isinstance(open_store(None), MemoryStore)
    monkeypatch.delenv("TURNSTREAM_DB")
    store = open_store()
    assert isinstance(store, SQLiteStore) and store.path == "./turnstream.db"


@pytest.mark.parametrize("url", [
    "mysql://root:hunter2@db/x", "chat.db", "sqlite://chat.db", "sqlite:///", "",
])
def test_bad_urls_are_usage_errors_that_hide_passwords(url: str) -> None:
    with pytest.raises(UsageError, match="sqlite:///") as info:
        open_store(url)
    assert "hunter2" not in str(info.value)


async def test_an_opened_sqlite_store_creates_its_file_and_folder(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/data/sub.db")
    await store.open()
    try:
        assert (tmp_path / "data" / "sub.db").exists()
    finally:
        await store.aclose()


async def test_a_private_in_memory_sqlite_database_works() -> None:
    store = open_store("sqlite:///:memory:")
    await store.open()
    try:
        session = await store.create_session("usr_1")
        turn = await store.create_turn(session.id, "hi", model="m")
        assert (await store.get_turn(turn.id)) == turn
    finally:
        await store.aclose()
