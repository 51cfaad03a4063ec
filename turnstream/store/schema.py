"""The schema of the SQL stores: the numbered migrations for each dialect, and which of
them a database still needs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from ..errors import StoreError

Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+?)(?:\.(sqlite|postgres))?\.sql$")


def migrations(dialect: Dialect) -> list[Migration]:
    """The numbered migrations for one dialect, in order.

    ``NNNN_name.sql`` serves both dialects; ``NNNN_name.<dialect>.sql`` is one dialect's
    variant and wins over a shared file of the same number. Numbers may have gaps (each line
    of work gets its own number before the others have landed): a database applies every
    migration it has not had yet, in rising order, so those that fill a gap later are
    applied after higher ones, and must not depend on them.
    """
    chosen: dict[int, tuple[bool, Migration]] = {}
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        m = _FILE.match(entry.name)
        if m is None or (m[3] is not None and m[3] != dialect):
            continue
        version, specific = int(m[1]), m[3] is not None
        if version in chosen and chosen[version][0] and not specific:
            continue
        if version in chosen and chosen[version][0] == specific:
            raise StoreError(f"two migrations numbered {version:04d} for {dialect}")
        chosen[version] = (specific, Migration(version, m[2], entry.read_text(encoding="utf-8")))
    found = [mig for _, mig in sorted(chosen.values(), key=lambda c: c[1].version)]
    if not found or found[0].version != 1:
        raise StoreError(f"migrations for {dialect} do not begin with 0001: {[mig.version for mig in found]}")
    return found


SCHEMA_MIGRATIONS = """
-- schema_migrations: which numbered migrations this database has had, so that open()
-- applies each exactly once, in order, and a newer schema is never migrated twice.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  double precision NOT NULL
)
"""


def pending(done: set[int], dialect: Dialect) -> list[Migration]:
    """The migrations a database that has had ``done`` still needs, in order; ``StoreError``
    when it has had one this turnstream does not know (a newer version wrote it)."""
    known = migrations(dialect)
    if done - {m.version for m in known}:
        raise StoreError(f"the database has migrations {sorted(done)} unknown to this turnstream;"
                         " a newer version wrote it")
    return [m for m in known if m.version not in done]
