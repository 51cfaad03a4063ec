"""The SQL stores' statements (``turnstream/store/statements.py``), as each backend gets them:
SQLite's compile against the migrated schema, PostgreSQL's number their parameters without a
gap (the server cannot type a parameter no statement uses)."""

from __future__ import annotations

import re
import sqlite3

from turnstream.store.schema import SCHEMA_MIGRATIONS, migrations
from turnstream.store.statements import POSTGRES, SQLITE, Statements


def _statements(q: Statements) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in vars(q).items():
        if isinstance(value, str) and not name.startswith("_"):
            out[name] = value
        elif isinstance(value, tuple):
            out.update({f"{name}[{i}]": v for i, v in enumerate(value)})
    return out


def test_every_sqlite_statement_compiles_against_the_migrated_schema() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(SCHEMA_MIGRATIONS)
    for mig in migrations("sqlite"):
        conn.executescript(mig.sql)
    found = _statements(SQLITE)
    assert len(found) > 60
    for name, sql in found.items():
        assert "$" not in sql and "::" not in sql, name
        if name.endswith("_where"):  # a statement that ends in a column, for a list of values
            sql = SQLITE.in_(sql, 2)
        numbered = [int(n) for n in re.findall(r"\?(\d+)", sql)]
        count = max(numbered, default=0) + len(re.findall(r"\?(?!\d)", sql))
        conn.execute("EXPLAIN " + sql, [None] * count)  # prepared: tables, columns and syntax hold


def test_every_postgres_statement_numbers_its_parameters_from_one_without_a_gap() -> None:
    found = _statements(POSTGRES)
    assert len(found) > 60
    for name, sql in found.items():
        assert "?" not in sql, name
        numbers = {int(n) for n in re.findall(r"\$(\d+)", sql)}
        assert numbers == set(range(1, len(numbers) + 1)), name


def test_a_list_parameter_is_one_mark_a_value_on_sqlite_and_one_array_on_postgres() -> None:
    assert SQLITE.any_of(SQLITE.blobs_where, ["a", "b"]) == (
        "SELECT sha256, data FROM blobs WHERE sha256 IN (?, ?)", ["a", "b"])
    assert POSTGRES.any_of(POSTGRES.blobs_where, ["a", "b"]) == (
        "SELECT sha256, data FROM blobs WHERE sha256 = ANY($1::text[])", [["a", "b"]])
