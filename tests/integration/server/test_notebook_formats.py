"""Every data format the notebook takes, end to end on a real server: a small real file of each
(written here with DuckDB and openpyxl) is uploaded through the HTTP route, described at upload
(rows, columns, numeric columns), loaded in the sandboxed kernel as a DataFrame named after the
file, and queried from a SQL cell."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import duckdb
import httpx2 as httpx
import openpyxl

from tests.support.server import Server, new_session

from .test_notebook_api import add_cell, nb_url, upload

ROWS = [("North", 120, 9.5), ("South", 80, 9.5), ("North", 60, 14.0), ("East", 30, 14.0)]
COLUMNS = ["region", "units", "price"]


def tsv() -> bytes:
    lines = ["\t".join(COLUMNS)] + ["\t".join(str(v) for v in row) for row in ROWS]
    return ("\n".join(lines) + "\n").encode()


def records_json() -> bytes:
    return json.dumps([dict(zip(COLUMNS, row, strict=True)) for row in ROWS]).encode()


def parquet(tmp_path: Path) -> bytes:
    path = tmp_path / "orders.parquet"
    values = ", ".join(f"('{r}', {u}, {p})" for r, u, p in ROWS)
    duckdb.execute(f"COPY (SELECT * FROM (VALUES {values}) AS t({', '.join(COLUMNS)})) TO '{path}' (FORMAT PARQUET)")
    return path.read_bytes()


def xlsx() -> bytes:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(COLUMNS)
    for row in ROWS:
        ws.append(list(row))
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def run(c: httpx.Client, sid: str, code: str, language: str = "python") -> dict[str, Any]:
    cell = add_cell(c, sid, code, language=language)
    r = c.post(nb_url(sid, f"/cells/{cell['id']}/run"))
    assert r.status_code == 200, r.text
    return dict(r.json()["cell"])


def test_every_format_loads_as_a_dataframe_named_after_its_file_and_is_queryable_in_sql(
        server: Server, tmp_path: Path) -> None:
    files = {"tabbed.tsv": tsv(), "records.json": records_json(), "orders.parquet": parquet(tmp_path),
             "book.xlsx": xlsx()}
    with server.client() as c:
        sid = new_session(c)
        r = upload(c, sid, *files.items())
        assert r.status_code == 201, r.text
        infos = {f["name"]: f for f in r.json()["files"]}
        for name, info in infos.items():  # the shape is known at upload, for every format
            assert (info["rows"], info["columns"], info["numeric_columns"]) == (4, COLUMNS, ["units", "price"]), name
        for name in files:
            var = infos[name]["variable"]
            assert var == name.split(".")[0]
            cell = run(c, sid, f"type({var}).__name__, {var}.shape, list({var}.columns)")
            assert cell["status"] == "success", (name, cell["outputs"])
            assert cell["outputs"] == [{"type": "text", "text": f"('DataFrame', (4, 3), {COLUMNS!r})"}], name
            sql = run(c, sid, f"SELECT region, CAST(SUM(units) AS INTEGER) AS units FROM {var} "
                              "GROUP BY region ORDER BY units DESC", language="sql")
            assert sql["status"] == "success", (name, sql["outputs"])
            table = sql["outputs"][-1]
            assert table["type"] == "table" and table["rows"] == 3, (name, table)
            assert table["text"].split()[:5] == ["region", "units", "0", "North", "180"], (name, table["text"])
