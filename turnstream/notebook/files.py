"""Data files of a notebook: their names, their formats, sniffing what they hold, reading them.

Standard library only: the kernel child loads this file too (``child.py``), on its own, without
its package. The server sniffs an upload with it (``sniff``: text or binary, the first
character, the magic bytes, a workbook's part names) and parses nothing a hostile file could
exploit: its shape (rows, columns as pandas names them, numeric columns) is read inside the
sandbox, with pandas and DuckDB under a kernel's limits (``describe.py``).

* A name is 1 to 128 characters of letters, digits, spaces, ``_``, ``-`` and ``.``, starts
  with a letter or a digit, has no ``..``, and ends in ``.csv``, ``.tsv``, ``.parquet``, ``.json``
  or ``.xlsx``: no path separator, no leading dot, nothing a path could escape with.
* The name says which format the file claims to be; ``sniff`` then looks at the content and
  refuses a file that does not look like that format (a PNG called ``sales.csv``), and the
  sandbox refuses one that does not read as it (``describe``). Refusals are
  ``ValueError``s whose message is meant for the user (the child cannot import the error tree;
  the manager raises ``InvalidValue`` for them).
* A file is loaded into the namespace under its *variable*, the name without its suffix made
  an identifier (``sales-2024.csv`` is ``sales_2024``, ``Q1 report.csv`` ``Q1_report``), when
  a cell uses that name and no cell above it defines it. ``load_expr`` is the one expression
  that reads it, in the kernel and in an exported ``.ipynb`` alike.
"""

from __future__ import annotations

import hashlib
import io
import keyword
import re
import zipfile
from dataclasses import dataclass, replace
from typing import Any, Literal

Format = Literal["csv", "tsv", "parquet", "json", "xlsx"]
SUFFIXES: dict[str, Format] = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".json": "json",
                               ".xlsx": "xlsx"}
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)
_NOT_IDENT = re.compile(r"\W")


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
    ``None`` when no sandboxed process could describe the file (none can start here)."""
    columns: list[str] | None = None
    """The DataFrame's column names, as pandas makes them (``Unnamed: 2`` for a blank one)."""
    numeric_columns: list[str] | None = None
    """Columns of a number type in the DataFrame the kernel reads."""

    def described(self, rows: int, columns: list[str], numeric: list[str]) -> FileInfo:
        return replace(self, rows=rows, columns=columns, numeric_columns=numeric)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "variable": self.variable, "format": self.format, "bytes": self.bytes,
                "sha256": self.sha256, "rows": self.rows, "columns": self.columns,
                "numeric_columns": self.numeric_columns}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileInfo:
        return cls(str(d["name"]), str(d["variable"]), str(d["format"]), int(d["bytes"]), str(d["sha256"]),
                   d.get("rows"), d.get("columns"), d.get("numeric_columns"))


def sniff(name: str, data: bytes) -> FileInfo:
    """Whether ``data`` looks like the format its name claims, from its marks only (text or
    binary, the first character, the magic bytes, a workbook's part names); ``ValueError`` when
    it does not. The shape is left unknown: ``describe`` reads it in the sandbox."""
    fmt = check_name(name)
    if not data:
        raise ValueError(f"{name} is empty")
    if fmt in ("csv", "tsv"):
        what = "CSV" if fmt == "csv" else "TSV (tab-separated)"
        first = _text(name, data, what).lstrip("\ufeff").partition("\n")[0]
        if not first.strip():
            raise ValueError(f"{name} is not {what}: its first line holds no column names")
        if fmt == "csv" and "\t" in first and "," not in first:
            raise ValueError(f"{name} is not CSV: its fields are separated by tabs (name it .tsv)")
    elif fmt == "json":
        if _text(name, data, "JSON").lstrip("\ufeff \t\r\n")[:1] not in ("[", "{"):
            raise ValueError(f"{name} is not a JSON table: give a list of records ([{{\"a\": 1}}, …]) or an "
                             "object of equally long columns ({\"a\": [1, 2], \"b\": [3, 4]})")
    elif fmt == "parquet":
        if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
            raise ValueError(f"{name} is not a Parquet file: it lacks the PAR1 marks a Parquet file starts "
                             "and ends with")
    else:
        _sniff_workbook(name, data)
    return FileInfo(name, variable(name), fmt, len(data), hashlib.sha256(data).hexdigest())


def _sniff_workbook(name: str, data: bytes) -> None:
    """A workbook is a zip archive with a workbook part and a worksheet (its directory only is
    read, never a part)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            parts = z.namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ValueError(f"{name} is not an Excel workbook: this is not one (.xlsx is a zip archive)") from None
    if "xl/workbook.xml" not in parts:
        raise ValueError(f"{name} is not an Excel workbook: an archive without xl/workbook.xml")
    if not any(p.startswith("xl/worksheets/") for p in parts):
        raise ValueError(f"{name} is not an Excel workbook the notebook can read: it has no worksheet")


def _text(name: str, data: bytes, what: str) -> str:
    if b"\x00" in data[:65536]:
        raise ValueError(f"{name} is not {what}: it holds binary data")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not {what}: it is not UTF-8 text (byte {exc.start})") from None


__all__ = ["NAME_PATTERN", "SUFFIXES", "FileInfo", "Format", "check_name", "load_expr", "sniff", "variable"]
