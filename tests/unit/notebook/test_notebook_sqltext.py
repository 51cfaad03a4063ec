"""`{{name}}` becomes a bound parameter, never text; result names and table references."""

from __future__ import annotations

import pytest

from turnstream.notebook import sqltext

EVIL = "x'; DROP TABLE t; --"


def test_params_become_placeholders_with_values_beside_them() -> None:
    sql, params = sqltext.bind("SELECT * FROM p WHERE name = {{who}} AND age > {{ age }} OR name = {{who}}",
                               {"who": EVIL, "age": 3})
    assert sql == "SELECT * FROM p WHERE name = ? AND age > ? OR name = ?"
    assert params == [EVIL, 3, EVIL]
    assert EVIL not in sql


def test_braces_in_strings_and_comments_are_not_params() -> None:
    sql = "SELECT '{{a}}', \"{{b}}\" -- {{c}}\n/* {{d}} */ FROM t WHERE x = {{e}} AND y = 'it''s {{f}}'"
    pos = sqltext.to_positional(sql)
    assert pos.names == ("e",)
    assert pos.sql == sql.replace("{{e}}", "?")


def test_missing_param_is_a_clear_name_error() -> None:
    with pytest.raises(NameError, match=r"\{\{nope\}\} is not defined"):
        sqltext.bind("SELECT {{nope}}", {})


def test_unterminated_quote_does_not_hang_or_bind() -> None:
    assert sqltext.to_positional("SELECT 'abc {{x}}").names == ()


def test_segments_rejoin_to_the_input() -> None:
    sql = "SELECT 'a' || \"b\" -- c\n/* d */ FROM t /* open"
    assert "".join(text for _, text in sqltext.segments(sql)) == sql


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("-- name: df2\nSELECT 1", "df2"),
        ("\n  -- a note\n-- Name : top_10\nSELECT 1", "top_10"),
        ("SELECT 1 -- name: nope", None),
        ("SELECT 1\n-- name: late", None),
        ("-- name: two words\nSELECT 1", None),
    ],
)
def test_result_name(sql: str, name: str | None) -> None:
    assert sqltext.result_name(sql) == name


def test_table_refs() -> None:
    sql = ("SELECT * FROM a, b AS bb JOIN c ON true LEFT JOIN d x ON true "
           "WHERE id IN (SELECT id FROM e) AND s = 'from f' -- join g")
    assert sqltext.table_refs(sql) == ["a", "b", "c", "d", "e"]
