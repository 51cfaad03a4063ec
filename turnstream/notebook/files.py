"""Data files of a notebook: their names, their formats, checking what they hold, reading them.

Standard library only: the kernel child loads this file too (``child.py``), on its own, without
its package. The server checks an upload with it, and learns its shape (rows, columns, numeric
columns) at once, for every format, without handing the bytes to a library a hostile file could
exploit: pandas, DuckDB and openpyxl read a file only inside the sandbox. CSV, TSV and JSON are
parsed here; of a Parquet file only its footer is read (``parquet_meta``), of a workbook only its
first sheet, through capped streams (``xlsx_meta``). Describing a file in the sandboxed kernel
instead would tie every upload to a kernel (one of a capped number, started for it, and busy
while a cell runs), and pandas reading a large workbook takes longer than a cell may run.

* A name is 1 to 128 characters of letters, digits, spaces, ``_``, ``-`` and ``.``, starts
  with a letter or a digit, has no ``..``, and ends in ``.csv``, ``.tsv``, ``.parquet``, ``.json``
  or ``.xlsx``: no path separator, no leading dot, nothing a path could escape with.
* The name says which format the file claims to be; ``check`` then reads the content and
  refuses a file whose content is not that format (a PNG called ``sales.csv``). Refusals are
  ``ValueError``s whose message is meant for the user (the child cannot import the error tree;
  the manager raises ``InvalidValue`` for them).
* A file is loaded into the namespace under its *variable*, the name without its suffix made
  an identifier (``sales-2024.csv`` is ``sales_2024``, ``Q1 report.csv`` ``Q1_report``), when
  a cell uses that name and no cell above it defines it. ``load_expr`` is the one expression
  that reads it, in the kernel and in an exported ``.ipynb`` alike.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import keyword
import re
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["csv", "tsv", "parquet", "json", "xlsx"]
SUFFIXES: dict[str, Format] = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".json": "json",
                               ".xlsx": "xlsx"}
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)
_NOT_IDENT = re.compile(r"\W")
NUMERIC_SAMPLE = 10_000
"""Rows of a CSV or JSON file looked at to tell which columns are numeric."""


def check_name(name: str) -> Format:
    """The format ``name`` claims; ValueError when the name is not allowed."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"{name!r} is not a usable file name: 1 to 128 letters, digits, spaces, '_', '-' and '.', "
                      "starting with a letter or a digit, with no '..' and no path separator")
    dot = name.rfind(".")
    fmt = SUFFIXES.get(name[dot:].lower()) if dot > 0 else None
    if fmt is None:
        raise ValueError(f"{name!r} is not a data file this notebook reads: the name must end in "
                      f"{', '.join(SUFFIXES)}")
    return fmt


def variable(name: str) -> str:
    """The Python name a file is loaded under: ``sales.csv`` -> ``sales``."""
    stem = _NOT_IDENT.sub("_", name[: name.rfind(".")])
    if not stem.isidentifier():
        stem = f"df_{stem}"
    return f"{stem}_" if keyword.iskeyword(stem) else stem


def load_expr(fmt: str, file: str) -> str:
    """The expression that reads ``file`` as a DataFrame (``pd`` is pandas, ``duckdb`` DuckDB)."""
    if fmt == "csv":
        return f"pd.read_csv({file!r})"
    if fmt == "tsv":
        return f"pd.read_csv({file!r}, sep='\\t')"
    if fmt == "json":
        return f"pd.read_json({file!r})"
    if fmt == "xlsx":
        return f"pd.read_excel({file!r})"
    if fmt == "parquet":  # DuckDB reads Parquet without pyarrow
        return f"duckdb.read_parquet({file!r}).df()"
    raise ValueError(f"unknown format {fmt!r}")


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What the server knows of a stored file without loading it."""

    name: str
    variable: str
    format: str
    bytes: int
    sha256: str
    rows: int | None = None
    """Data rows. ``rows``, ``columns`` and ``numeric_columns`` are known together or not at all:
    ``None`` for a workbook too large to describe within ``xlsx_meta``'s caps (and for files
    stored before shapes were read at upload)."""
    columns: list[str] | None = None
    """The DataFrame's column names, as pandas makes them (``Unnamed: 2`` for a blank one)."""
    numeric_columns: list[str] | None = None
    """Columns whose every value is a number: in the first ``NUMERIC_SAMPLE`` rows of a CSV, TSV
    or JSON file, the first ``xlsx_meta.SAMPLE_ROWS`` of a workbook, by their type in Parquet."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "variable": self.variable, "format": self.format, "bytes": self.bytes,
                "sha256": self.sha256, "rows": self.rows, "columns": self.columns,
                "numeric_columns": self.numeric_columns}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileInfo:
        return cls(str(d["name"]), str(d["variable"]), str(d["format"]), int(d["bytes"]), str(d["sha256"]),
                   d.get("rows"), d.get("columns"), d.get("numeric_columns"))


def check(name: str, data: bytes) -> FileInfo:
    """Read ``data`` as the format its name claims; ``ValueError`` when it is not that."""
    fmt = check_name(name)
    if not data:
        raise ValueError(f"{name} is empty")
    rows: int | None = None
    columns: list[str] | None = None
    numeric: list[str] | None = None
    if fmt in ("csv", "tsv"):
        rows, columns, numeric = _delimited(name, data, "," if fmt == "csv" else "\t")
    elif fmt == "json":
        rows, columns, numeric = _json_table(name, data)
    else:
        rows, columns, numeric = _binary_shape(name, fmt, data)
    return FileInfo(name, variable(name), fmt, len(data), hashlib.sha256(data).hexdigest(), rows, columns, numeric)


def _text(name: str, data: bytes, what: str) -> str:
    if b"\x00" in data[:65536]:
        raise ValueError(f"{name} is not {what}: it holds binary data")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not {what}: it is not UTF-8 text (byte {exc.start})") from None


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _numeric(columns: list[str], records: list[dict[str, Any]]) -> list[str]:
    out = []
    for col in columns:
        values = [r.get(col) for r in records]
        present = [v for v in values if v not in (None, "")]
        if present and all(_is_number(v) for v in present):
            out.append(col)
    return out


def _delimited(name: str, data: bytes, sep: str) -> tuple[int, list[str], list[str]]:
    what = "CSV" if sep == "," else "TSV (tab-separated)"
    text = _text(name, data, what)
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True)
        first = next(reader, None)
        if not first or not any(h.strip() for h in first):
            raise ValueError(f"{name} is not {what}: its first line holds no column names")
        header = frame_columns(first)
        sample: list[dict[str, Any]] = []
        rows = 0
        for row in reader:
            if not row:
                continue
            if len(row) > len(header):
                raise ValueError(f"{name} is not {what}: line {reader.line_num} has {len(row)} fields, "
                              f"the header {len(header)}")
            rows += 1
            if rows <= NUMERIC_SAMPLE:
                sample.append(dict(zip(header, row, strict=False)))
    except csv.Error as exc:
        raise ValueError(f"{name} is not {what}: {exc}") from None
    if sep == "," and len(header) == 1 and "\t" in header[0]:
        raise ValueError(f"{name} is not CSV: its fields are separated by tabs (name it .tsv)")
    return rows, header, _numeric(header, sample)


def _json_table(name: str, data: bytes) -> tuple[int, list[str], list[str]]:
    try:
        doc = json.loads(_text(name, data, "JSON"))
    except ValueError as exc:
        raise ValueError(f"{name} is not JSON: {exc}") from None
    if isinstance(doc, list) and doc and all(isinstance(r, dict) for r in doc):
        columns = list(dict.fromkeys(str(k) for r in doc[:NUMERIC_SAMPLE] for k in r))
        return len(doc), columns, _numeric(columns, doc[:NUMERIC_SAMPLE])
    if isinstance(doc, dict) and doc and all(isinstance(v, list | dict) for v in doc.values()):
        lengths = {len(v) for v in doc.values()}
        if len(lengths) == 1:
            columns = [str(k) for k in doc]
            records = [dict(zip(columns, vals, strict=True))
                       for vals in zip(*(list(v.values()) if isinstance(v, dict) else v for v in doc.values()),
                                       strict=True)][:NUMERIC_SAMPLE]
            return lengths.pop(), columns, _numeric(columns, records)
    raise ValueError(f"{name} is JSON but not a table: give a list of records ([{{\"a\": 1}}, …]) or an object "
                  "of equally long columns ({\"a\": [1, 2], \"b\": [3, 4]})")


def _binary_shape(name: str, fmt: Format, data: bytes) -> tuple[int | None, list[str] | None, list[str] | None]:
    # Imported here, not at the top: the kernel child loads this file alone and never checks content.
    from . import parquet_meta, xlsx_meta

    try:
        if fmt == "parquet":
            shape = parquet_meta.describe(data)
        else:
            sheet = xlsx_meta.describe(data)
            if sheet is None:
                return None, None, None
            rows, header, numeric = sheet
            columns = frame_columns(header)
            shape = rows, columns, [columns[i] for i in numeric]
    except ValueError as exc:
        what = "a Parquet file" if fmt == "parquet" else "an Excel workbook"
        raise ValueError(f"{name} is not {what}: {exc}") from None
    return shape if shape is not None else (None, None, None)


def frame_columns(names: list[str]) -> list[str]:
    """The column names pandas gives a header: ``Unnamed: i`` for a blank one, ``.1``, ``.2``
    after a repeated one."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        name = name or f"Unnamed: {i}"
        if name in seen:
            seen[name] += 1
            name = f"{name}.{seen[name]}"
        seen.setdefault(name, 0)
        out.append(name)
    return out


__all__ = ["NAME_PATTERN", "SUFFIXES", "FileInfo", "Format", "check", "check_name", "frame_columns", "load_expr",
           "variable"]
