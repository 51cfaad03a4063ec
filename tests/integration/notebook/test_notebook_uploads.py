"""Uploads are described inside the sandbox (issue 26, item 7): the server only sniffs a file and
caps its size; pandas, openpyxl and DuckDB read it in a sandboxed process under a kernel's
limits. Hostile files (JSON nested 100,000 deep, a zip bomb, billion laughs, a fake Parquet
footer) are refused naming the file, and the server process never parses them."""

from __future__ import annotations

import io
import itertools
import struct
import time
import zipfile
from collections.abc import AsyncIterator

import openpyxl
import pytest
import pytest_asyncio

from turnstream.errors import InvalidValue
from turnstream.notebook import InMemoryNotebooks, KernelLimits, NotebookManager
from turnstream.notebook.files import sniff

pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count()
TIME_LIMIT = 5.0


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def manager() -> AsyncIterator[NotebookManager]:
    m = NotebookManager(InMemoryNotebooks(), limits=KernelLimits(time_limit=TIME_LIMIT))
    yield m
    await m.aclose()


def sid() -> str:
    return f"uploads-{next(_ids)}"


def workbook(rows: list[list[object]]) -> bytes:
    wb = openpyxl.Workbook()
    for row in rows:
        wb.active.append(row)
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def with_part(data: bytes, part: str, body: bytes) -> bytes:
    """The workbook ``data`` with ``part`` replaced by ``body``."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for item in src.infolist():
            z.writestr(item, body if item.filename == part else src.read(item.filename))
    return out.getvalue()


def zip_bomb() -> bytes:
    """A valid workbook whose one sheet inflates to about 1 GiB of rows (a 1 MiB download)."""
    good = workbook([["a"], [1]])
    src = zipfile.ZipFile(io.BytesIO(good))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for item in src.infolist():
            if item.filename != "xl/worksheets/sheet1.xml":
                z.writestr(item, src.read(item.filename))
                continue
            with z.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as f:
                f.write(b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>')
                row = b'<row><c t="n"><v>1</v></c></row>' * 32768
                for _ in range(1024):
                    f.write(row)
                f.write(b"</sheetData></worksheet>")
    return out.getvalue()


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
          + b"".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">'.encode()
                     for i in range(1, 10))
          + b']><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            b'<row r="1"><c r="A1" t="inlineStr"><is><t>name</t></is></c></row>'
            b'<row r="2"><c r="A2" t="inlineStr"><is><t>&lol9;</t></is></c></row></sheetData></worksheet>')
"""A sheet whose one cell expands to 3 GB of "lol" (nine levels of ten entities each)."""


def attacks() -> dict[str, bytes]:
    strings = workbook([["name"], ["x"]])
    return {
        "deep.json": b"[" * 100_000 + b"]" * 100_000,
        "deep-object.json": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        "bomb.xlsx": zip_bomb(),
        "laughs.xlsx": with_part(strings, "xl/worksheets/sheet1.xml", LAUGHS),
        "footer.parquet": b"PAR1" + b"\x1c" * 10_000 + struct.pack("<I", 10_000) + b"PAR1",
        "lies.parquet": b"PAR1" + b"\x19\xfc\xff\xff\xff\xff\x0f" + struct.pack("<I", 7) + b"PAR1",
    }


async def test_a_good_file_is_described_as_the_kernel_reads_it(manager: NotebookManager) -> None:
    data = b"a,,a,when\n1,2,3,2024-01-01\n4,5,6,2024-02-01\n"
    [info] = await manager.add_files(sid(), [("t.csv", data)])
    assert (info.rows, info.columns, info.numeric_columns) == (2, ["a", "Unnamed: 1", "a.1", "when"],
                                                               ["a", "Unnamed: 1", "a.1"])
    [book] = await manager.add_files(sid(), [("b.xlsx", workbook([["k", "v"], ["x", 1.5], ["y", 2]]))])
    assert (book.rows, book.columns, book.numeric_columns) == (2, ["k", "v"], ["v"])


@pytest.mark.parametrize("name", list(attacks()))
async def test_a_hostile_file_is_refused_naming_it_within_the_limits(manager: NotebookManager, name: str) -> None:
    data = attacks()[name]
    sniff(name, data)  # each passes the server's sniff: only the sandbox reads it
    started = time.monotonic()
    with pytest.raises(InvalidValue) as caught:
        await manager.add_files(sid(), [("fine.csv", b"a\n1\n"), (name, data)])
    assert caught.value.field == "files[1]"
    assert str(caught.value).startswith(f"{name} is not "), str(caught.value)
    assert time.monotonic() - started < TIME_LIMIT + 15
