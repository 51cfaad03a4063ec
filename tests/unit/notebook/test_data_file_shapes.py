"""The shape of an uploaded data file (rows, columns, numeric columns), read on the server with
the standard library: each format's answer is what pandas or DuckDB make of the same file in the
kernel, and hostile files are refused or left undescribed within the readers' caps. Also what the
offline demo says of a file whose shape is unknown."""

from __future__ import annotations

import datetime
import io
import json
import random
import struct
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import duckdb
import openpyxl
import pandas as pd
import pytest

from turnstream.notebook import files, parquet_meta, xlsx_meta
from turnstream.scenarios.engine import RequestView, Scenario

Shape = tuple[int, list[str], list[str]]


def workbook_shape(data: bytes) -> Shape | None:
    """What the upload check says of a workbook: ``xlsx_meta``'s header named as pandas names it."""
    described = xlsx_meta.describe(data)
    if described is None:
        return None
    rows, header, numeric = described
    columns = files.frame_columns(header)
    return rows, columns, [columns[i] for i in numeric]


def frame_shape(df: pd.DataFrame, *, by_type: bool = False) -> Shape:
    """A DataFrame's shape as the readers say it: a numeric column holds at least one number (or,
    ``by_type``, has a number type, as Parquet's columns say)."""
    numeric = [c for c in df.select_dtypes(include="number", exclude="timedelta").columns
               if by_type or df[c].notna().any()]
    return len(df), [str(c) for c in df.columns], [str(c) for c in numeric]


def parquet(tmp_path: Path, query: str) -> tuple[bytes, Shape]:
    path = tmp_path / "t.parquet"
    duckdb.execute(f"COPY ({query}) TO '{path}' (FORMAT PARQUET, ROW_GROUP_SIZE 1000)")
    return path.read_bytes(), frame_shape(duckdb.read_parquet(str(path)).df(), by_type=True)  # the kernel's load_expr


PARQUET_QUERIES = {
    "plain": "SELECT 'North' AS region, 120 AS units, 9.5::DOUBLE AS price",
    "types": "SELECT range AS i, range::SMALLINT AS s, (range % 100)::TINYINT AS t, range::UBIGINT AS u, "
             "range::FLOAT AS f, range::DECIMAL(10, 2) AS dec, range::HUGEINT AS hi, "
             "DATE '2024-01-01' + range::INT AS d, TIMESTAMP '2024-01-01' AS ts, TIME '10:00' AS tm, "
             "true AS b, 'x' AS str, [1, 2] AS lst, {'a': 1, 'b': 'z'} AS st, MAP {'k': 1} AS mp, "
             "NULL AS nul, uuid() AS uid, 'x'::BLOB AS bl FROM range(2500)",
    "empty": "SELECT 1 AS a WHERE false",
}


@pytest.mark.parametrize("kind", PARQUET_QUERIES)
def test_a_parquet_footer_gives_what_duckdb_reads(tmp_path: Path, kind: str) -> None:
    data, want = parquet(tmp_path, PARQUET_QUERIES[kind])
    assert parquet_meta.describe(data) == want
    info = files.check("t.parquet", data)
    assert (info.rows, info.columns, info.numeric_columns) == want


def test_a_hostile_parquet_footer_is_refused_without_other_errors(tmp_path: Path) -> None:
    data, _ = parquet(tmp_path, "SELECT range AS i, 'a' || range AS s, [1, 2] AS l, {'a': 1} AS st FROM range(3000)")
    (length,) = struct.unpack("<I", data[-8:-4])

    def framed(footer: bytes) -> bytes:
        return b"PAR1" + footer + struct.pack("<I", len(footer)) + b"PAR1"

    refusals = {
        "nests too deep": framed(b"\x1c" * 10_000),  # struct in struct in struct …
        "more items than it holds": framed(b"\x19\xfc\xff\xff\xff\xff\x0f"),  # a list of 4 billion structs
        "longer than 10 bytes": framed(b"\x16" + b"\xff" * 20),
        "outside the file": data[:-8] + struct.pack("<I", len(data)) + b"PAR1",
        "cut short": framed(data[-8 - length:-8][: length // 2]),
        "PAR1": data[:-4] + b"PARE",
    }
    for why, bad in refusals.items():
        with pytest.raises(ValueError, match=why):
            parquet_meta.describe(bad)
    rng = random.Random(7)
    refused = 0
    for _ in range(1500):  # flipped footer bytes: a shape or a ValueError, nothing else
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            bad[len(data) - 8 - rng.randint(1, length)] = rng.randrange(256)
        try:
            parquet_meta.describe(bytes(bad))
        except ValueError:
            refused += 1
    assert 0 < refused < 1500


def workbook(fill: Callable[[Any], None]) -> bytes:
    wb = openpyxl.Workbook()
    fill(wb.active)
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def _plain(ws: Any) -> None:
    ws.append(["region", "units", "price", "when", "ok", "note"])
    for i in range(30):
        ws.append(["North" if i % 2 else "South", i, i * 1.5, datetime.date(2024, 1, 1 + i % 28), i % 3 == 0,
                   None if i % 4 else "n"])


def _sparse(ws: Any) -> None:  # pandas' header is row 1 even when it is blank; blank rows inside count
    ws["B3"], ws["C3"], ws["B4"], ws["C4"], ws["B6"], ws["D8"] = "a", "b", 1, "x", 2, 5
    ws["A9"].number_format = "0.00"  # a styled blank cell past the data: not a row


def _names(ws: Any) -> None:  # blank, repeated and numeric header cells; data wider than the header
    ws.append(["a", None, "a", 2024, 1.5, "a"])
    ws.append([1, 2, 3, 4, 5, 6, 7])
    ws.append([1, "x", 3, 4, 5, 6, None])


def _formats(ws: Any) -> None:  # percentages are numbers, times and dates are not
    ws.append(["v", "pct", "t", "d"])
    for i in range(10):
        ws.append([i, i / 10, datetime.time(10, i), 45000 + i])
        ws.cell(i + 2, 2).number_format = "0.0%"
        ws.cell(i + 2, 3).number_format = "h:mm"
        ws.cell(i + 2, 4).number_format = 'd" of "mmmm'


def _long(ws: Any) -> None:  # past the rows parsed cell by cell: the rest is scanned
    ws.append(["x", "y"])
    for i in range(xlsx_meta.SAMPLE_ROWS * 3):
        ws.append([i, f"s{i}"])
    ws.cell(xlsx_meta.SAMPLE_ROWS * 3 + 9, 1).number_format = "0.00"


@pytest.mark.parametrize("fill", [_plain, _sparse, _names, _formats, _long, lambda ws: None,
                                  lambda ws: ws.append(["only", "header"])])
def test_a_workbook_gives_what_pandas_reads(fill: Callable[[Any], None]) -> None:
    data = workbook(fill)
    assert workbook_shape(data) == frame_shape(pd.read_excel(io.BytesIO(data)))


NS = ('xmlns:x="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
      'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"


def handmade(rows_xml: str, strings: str, *, workbook_xml: str | None = None) -> bytes:
    """A workbook as Excel writes one: prefixed names, shared strings, parts where the relations say."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
                   'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
                   '<Override PartName="/xl/strings.xml" '
                   'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
                   "</Types>")
        z.writestr("xl/workbook.xml", workbook_xml or f'<x:workbook {NS}><x:sheets>'
                   '<x:sheet name="Chart" sheetId="2" r:id="rId9"/><x:sheet name="S" sheetId="1" r:id="rId7"/>'
                   '</x:sheets></x:workbook>')
        z.writestr("xl/_rels/workbook.xml.rels", '<Relationships xmlns="http://schemas.openxmlformats.org/package/'
                   f'2006/relationships"><Relationship Id="rId9" Type="{REL}chartsheet" Target="chartsheets/c.xml"/>'
                   f'<Relationship Id="rId7" Type="{REL}worksheet" Target="worksheets/data.xml"/>'
                   f'<Relationship Id="rId8" Type="{REL}sharedStrings" Target="/xl/strings.xml"/></Relationships>')
        z.writestr("xl/chartsheets/c.xml", f"<x:chartsheet {NS}/>")
        z.writestr("xl/chartsheets/_rels/c.xml.rels",
                   '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>')
        z.writestr("xl/worksheets/data.xml", f"<x:worksheet {NS}><x:sheetData>{rows_xml}</x:sheetData></x:worksheet>")
        z.writestr("xl/strings.xml", f"<x:sst {NS}>{strings}</x:sst>")
    return out.getvalue()


def test_an_excel_style_workbook_with_shared_strings() -> None:
    strings = ("<x:si><x:t>region</x:t></x:si><x:si><x:r><x:t>un</x:t></x:r><x:r><x:t>its</x:t></x:r>"
               '<x:rPh sb="0" eb="1"><x:t>yomi</x:t></x:rPh></x:si><x:si><x:t>North</x:t></x:si>')
    rows = ['<x:row r="1"><x:c r="A1" t="s"><x:v>0</x:v></x:c><x:c r="B1" t="s"><x:v>1</x:v></x:c></x:row>']
    rows += [f'<x:row r="{i}" spans="1:2"><x:c r="A{i}" t="s"><x:v>2</x:v></x:c><x:c r="B{i}"><x:v>{i}</x:v></x:c>'
             "</x:row>" for i in range(2, 2502)]
    rows.append('<x:row r="2600"><x:c r="A2600" s="0"/></x:row>')
    data = handmade("".join(rows), strings)
    want = frame_shape(pd.read_excel(io.BytesIO(data)))
    assert want == (2500, ["region", "units"], ["units"])
    assert workbook_shape(data) == want


def _sheet_writer(write: Callable[[IO[bytes]], None]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", f'<workbook {NS}><sheets><sheet r:id="rId1"/></sheets></workbook>')
        z.writestr("xl/_rels/workbook.xml.rels",
                   f'<Relationships><Relationship Id="rId1" Type="{REL}worksheet" Target="worksheets/s.xml"/>'
                   "</Relationships>")
        with z.open("xl/worksheets/s.xml", "w", force_zip64=True) as f:
            write(f)
    return out.getvalue()


BOMB_MIB = 64
"""Inflated size of the bombs below, against caps made smaller to match (the same code runs)."""


def _endless_rows(f: IO[bytes]) -> None:
    f.write(b'<worksheet><sheetData><row r="1"><c t="inlineStr"><is><t>a</t></is></c></row>')
    blob = b'<row r="2"><c r="A2"><v>1</v></c></row>' * 32768
    for _ in range(BOMB_MIB):
        f.write(blob)


def _endless_cell(f: IO[bytes]) -> None:
    f.write(b"<worksheet><sheetData><row r=\"1\"><c><v>")
    for _ in range(BOMB_MIB):
        f.write(b"1" * (1 << 20))
    f.write(b"</v></c></row></sheetData></worksheet>")


@pytest.mark.parametrize("write", [_endless_rows, _endless_cell])
def test_a_zip_bomb_is_described_as_unknown_in_bounded_memory(write: Callable[[IO[bytes]], None],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xlsx_meta, "MAX_SHEET_XML", BOMB_MIB // 4 * 1024 * 1024)
    monkeypatch.setattr(xlsx_meta, "MAX_SAMPLE_XML", BOMB_MIB // 16 * 1024 * 1024)
    data = _sheet_writer(write)
    assert len(data) < BOMB_MIB * 1024 * 1024 // 100
    tracemalloc.start()
    try:
        got = workbook_shape(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got is None
    assert peak < 12 * 1024 * 1024, peak  # a few chunks, never the inflated sheet
    info = files.check("bomb.xlsx", data)  # a valid workbook, of unknown shape
    assert (info.rows, info.columns, info.numeric_columns) == (None, None, None)


def test_workbooks_that_lie_are_refused() -> None:
    laughs = ('<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
              "<workbook>&b;</workbook>")
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
        for i in range(xlsx_meta.MAX_ENTRIES):
            z.writestr(f"p{i}", "")
    cases = {
        "document type": handmade("", "", workbook_xml=laughs),
        "more than": many.getvalue(),
        "no worksheet": handmade("", "", workbook_xml=f"<x:workbook {NS}><x:sheets/></x:workbook>"),
        "not XML": handmade("<x:row><x:c>", ""),
        "past column": handmade('<x:row r="1"><x:c r="ZZZ1"><x:v>1</x:v></x:c></x:row>', ""),
        "this is not one": b"region,units\nNorth,1\n",
    }
    for why, data in cases.items():
        with pytest.raises(ValueError, match=why):
            files.check("bad.xlsx", data)


def test_csv_column_names_are_the_ones_pandas_gives() -> None:
    data = b"a,,a,b\n1,2,3,x\n4,5,6,y\n"
    info = files.check("t.csv", data)
    assert (info.rows, info.columns, info.numeric_columns) == frame_shape(pd.read_csv(io.BytesIO(data)))


WEB_TOOLS = ["get_notebook_state", "create_cell", "update_cell", "run_cell", "delete_cell", "get_browser_time"]


def demo_texts(file: dict[str, Any]) -> str:
    """What the offline demo says over a turn about ``file``, its tool results faked."""
    demo = Scenario.builtin("notebook-demo")
    results = [json.dumps({"cells": [], "files": [file]})]
    said: list[str] = []
    for rounds in range(6):
        script = demo.script(RequestView(user_texts=1, rounds=rounds, results=results, last_input="Analyse my data",
                                         tool_names=WEB_TOOLS))
        said += [b.text for b in script.blocks if b.type == "text"]
        results.append(json.dumps({"cell_id": f"c{rounds}", "status": "success",
                                   "outputs": [{"type": "plotly", "summary": "a bar chart"}]}))
    return " ".join(said)


def test_the_demo_says_a_files_shape_only_when_it_is_known() -> None:
    known = files.check("sales.csv", b"region,units\nNorth,1\nSouth,2\n").to_dict()
    said = demo_texts(known)
    assert 'You uploaded sales.csv: 2 rows with the columns ["region", "units"].' in said
    unknown = {**known, "name": "big.xlsx", "variable": "big", "format": "xlsx", "rows": None, "columns": None,
               "numeric_columns": None}
    said = demo_texts(unknown)
    assert "You uploaded big.xlsx; I do not know its rows and columns yet" in said
    assert "`big`" in said and "a bar chart" in said
    for text in (said, demo_texts({**known, "numeric_columns": []})):
        assert "null" not in text and ", ," not in text and "{{" not in text
