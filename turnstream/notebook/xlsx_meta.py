"""The shape of an Excel workbook's first sheet, as ``pd.read_excel`` will see it, read with the
standard library under hard caps.

An ``.xlsx`` file is a zip archive of XML parts. This reads four of them, each through a capped
stream (never trusting the sizes the archive declares, so a zip bomb inflates no further than
the cap): ``xl/workbook.xml`` and its relationships (which part is the first worksheet), the
styles (which number formats are dates), the sheet itself, and the shared strings up to the
last one the header row uses. The XML parser is expat with document types refused, so no
entity can expand.

What pandas makes of the first sheet, and so what this reports: the header is the sheet's row 1
(a blank header cell is ``Unnamed: i``, a repeated name gets ``.1``, ``.2``), the columns run
from column A to the last column holding a value, and the data rows from row 2 to the last row
holding a value, blank rows between included. The first ``SAMPLE_ROWS`` rows are parsed cell by
cell (the header, the columns, which columns hold only numbers); after them only the last row
holding a value is looked for, by scanning the bytes, so a sheet of a million cells is
described in about the time it takes to inflate it. A sheet whose XML passes ``MAX_SHEET_XML``,
or that is too odd to scan (rows without their numbers, a row larger than ``MAX_ROW_XML``), is
described as ``None``: valid, but of unknown shape until a cell loads it.

Why one module of this size: one reader of one untrusted format, whose caps only hold if every
read goes through them; no well-kept library reads a workbook's shape without inflating it
whole (openpyxl and pandas do), which is why it is written here.
"""

from __future__ import annotations

import io
import itertools
import lzma
import posixpath
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO
from xml.parsers import expat

from ..errors import FileTooLarge

MAX_ENTRIES = 10_000
MAX_PART_XML = 8 * 1024 * 1024
"""Inflated bytes read of the workbook, its relationships, its styles and its shared strings."""
MAX_SHEET_XML = 256 * 1024 * 1024
MAX_SAMPLE_XML = 16 * 1024 * 1024
"""Bytes of the sheet parsed cell by cell at most; after them (or ``SAMPLE_ROWS`` rows) it is scanned."""
MAX_ROW_XML = 8 * 1024 * 1024
MAX_VALUE = 4096
"""Characters of one cell's value kept (a header name longer than that is cut)."""
MAX_COLUMNS = 16_384
SAMPLE_ROWS = 1_000
CHUNK = 1024 * 1024

_WORKSHEET = "/worksheet"
_DATE_FORMATS = {14, 15, 16, 17, 18, 19, 20, 21, 22, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 45, 46, 47, 50,
                 51, 52, 53, 54, 55, 56, 57, 58, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81}
"""Built-in number formats that show a date or a time (openpyxl reads such cells as datetimes)."""
_QUOTED_OR_BRACKETED = re.compile(r'"[^"]*"|\\.|\[(?!h+\]|m+\]|s+\])[^\]]*\]')
_DATE_CHARS = re.compile(r"[dmyhsDMYHS]")
_CELL_REF = re.compile(r"([A-Za-z]{1,3})(\d+)$")
_ROW_NUMBER = re.compile(rb"""\sr\s*=\s*["'](\d+)["']""")


def _is_date_format(code: str) -> bool:
    return bool(_DATE_CHARS.search(_QUOTED_OR_BRACKETED.sub("", code.split(";")[0])))


def _column(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def _local(name: str) -> str:
    """``uri local[ prefix]`` (expat's names with namespaces) -> ``local``."""
    parts = name.split(" ")
    return parts[1] if len(parts) > 1 else parts[0]


def _parser(start: Callable[[str, dict[str, str]], None], end: Callable[[str], None] | None = None,
            text: Callable[[str], None] | None = None) -> expat.XMLParserType:
    p = expat.ParserCreate(namespace_separator=" ")
    p.namespace_prefixes = True

    def refuse(*_: object) -> None:
        raise ValueError("it holds an XML document type, which a workbook never needs")

    p.StartDoctypeDeclHandler = refuse
    p.EntityDeclHandler = refuse
    p.StartElementHandler = start
    if end is not None:
        p.EndElementHandler = end
    if text is not None:
        p.CharacterDataHandler = text
    return p


def _chunks(stream: IO[bytes], cap: int) -> Iterator[bytes]:
    """The part's bytes; ``FileTooLarge`` past ``cap`` (the workbook may be fine: its shape is
    then not worth finding out, and ``describe`` says so with None)."""
    read = 0
    while chunk := stream.read(CHUNK):
        read += len(chunk)
        if read > cap:
            raise FileTooLarge(f"a part of the workbook inflates past {cap} bytes", cap)
        yield chunk


def _parse(z: zipfile.ZipFile, part: str, parser: expat.XMLParserType, cap: int = MAX_PART_XML,
           done: Callable[[], bool] = lambda: False) -> None:
    """Feed ``part`` to ``parser`` until it ends, or until ``done()`` after a chunk (the handlers
    have what they need: they ignore the rest of that chunk)."""
    try:
        with z.open(part) as stream:
            for chunk in _chunks(stream, cap):
                parser.Parse(chunk, False)
                if done():
                    return
            parser.Parse(b"", True)
    except expat.ExpatError as exc:
        raise ValueError(f"its part {part} is not XML ({exc})") from None


def _first_sheet(z: zipfile.ZipFile) -> tuple[str, str | None, str | None]:
    """The parts of the first worksheet, the styles and the shared strings."""
    rel_ids: list[str] = []

    def sheet(name: str, attrs: dict[str, str]) -> None:
        if _local(name) == "sheet":
            rel_ids.extend(v for k, v in attrs.items() if " " in k and _local(k) == "id")

    _parse(z, "xl/workbook.xml", _parser(sheet))
    targets: dict[str, tuple[str, str]] = {}

    def relationship(name: str, attrs: dict[str, str]) -> None:
        if _local(name) == "Relationship" and "Id" in attrs:
            targets[attrs["Id"]] = (attrs.get("Type", ""), attrs.get("Target", ""))

    if "xl/_rels/workbook.xml.rels" in z.NameToInfo:
        _parse(z, "xl/_rels/workbook.xml.rels", _parser(relationship))

    def part(target: str) -> str | None:
        path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(f"xl/{target}")
        return path if path in z.NameToInfo else None

    sheets = [part(targets[i][1]) for i in rel_ids if i in targets and targets[i][0].endswith(_WORKSHEET)]
    first = next((s for s in sheets if s is not None), None)
    if first is None:
        raise ValueError("it has no worksheet")
    kinds = {kind.rsplit("/", 1)[-1]: part(target) for kind, target in targets.values()}
    return first, kinds.get("styles"), kinds.get("sharedStrings")


def _date_styles(z: zipfile.ZipFile, part: str | None) -> set[int]:
    """Indexes of the cell styles whose number format shows a date or a time."""
    if part is None:
        return set()
    custom: dict[int, str] = {}
    formats: list[int] = []
    depth: list[str] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        local = _local(name)
        if local == "numFmt" and attrs.get("numFmtId", "").isdigit():
            custom[int(attrs["numFmtId"])] = attrs.get("formatCode", "")
        elif local == "xf" and depth and depth[-1] == "cellXfs":
            fmt = attrs.get("numFmtId", "0")
            formats.append(int(fmt) if fmt.isdigit() else 0)
        depth.append(local)

    def end(_: str) -> None:
        depth.pop()

    _parse(z, part, _parser(start, end))
    return {i for i, f in enumerate(formats) if f in _DATE_FORMATS or (f in custom and _is_date_format(custom[f]))}


@dataclass(slots=True)
class _Cell:
    column: int
    kind: str
    """``number``, ``shared`` (an index into the shared strings), or ``text``."""
    value: str


@dataclass(slots=True)
class _Sheet:
    """What the cell-by-cell parse of the sheet's first rows found. Its memory stays small
    whatever the sheet holds: the header row's cells, a flag per column, and the current cell's
    first ``MAX_VALUE`` characters."""

    date_styles: set[int]
    prefix: str = ""
    """The sheet's namespace prefix (``x:`` in ``<x:row>``), for the byte scan after the sample."""
    header: list[_Cell] = field(default_factory=list)
    width: int = 0
    last_row: int = 0
    """The last row number (1-based) that holds a value."""
    numbers: dict[int, bool] = field(default_factory=dict)
    """Column -> whether every value seen in it (below the header) is a number."""
    rows_seen: int = 0
    stop_at: int | None = None
    """Where the sample ended (the parser's byte index at the end of its last row), once read."""
    where: Callable[[], int] = lambda: 0
    """The parser's byte index now (``_describe`` sets it)."""
    _row: int = 0
    _column: int = 0
    _row_has_value: bool = False
    _cell: dict[str, str] | None = None
    _text: list[str] = field(default_factory=list)
    _text_len: int = 0
    _collect: bool = False
    """Inside a cell's ``<v>``, or a ``<t>`` of its inline string (not of its phonetic reading)."""
    _in_phonetic: bool = False

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if self.stop_at is not None:
            return
        local = _local(name)
        if local == "worksheet":
            parts = name.split(" ")
            self.prefix = f"{parts[2]}:" if len(parts) > 2 else ""
        elif local == "row":
            self._row = int(attrs["r"]) if attrs.get("r", "").isdigit() else self._row + 1
            self._column = 0
            self._row_has_value = False
        elif local == "c":
            self._cell = attrs
            self._text, self._text_len = [], 0
        elif local == "rPh":
            self._in_phonetic = True
        elif local in ("v", "t") and self._cell is not None and not self._in_phonetic:
            self._collect = True

    def text(self, data: str) -> None:
        if self._collect and self._text_len < MAX_VALUE and self.stop_at is None:
            self._text.append(data)
            self._text_len += len(data)

    def end(self, name: str) -> None:
        if self.stop_at is not None:
            return
        local = _local(name)
        if local in ("v", "t"):
            self._collect = False
        elif local == "rPh":
            self._in_phonetic = False
        elif local == "c" and self._cell is not None:
            self._end_cell(self._cell)
            self._cell = None
        elif local == "row":
            self._end_row()

    def _end_cell(self, attrs: dict[str, str]) -> None:
        m = _CELL_REF.match(attrs.get("r", ""))
        self._column = _column(m.group(1)) if m else self._column + 1
        if self._column > MAX_COLUMNS:
            raise ValueError(f"its first sheet has a cell past column {MAX_COLUMNS}, Excel's last")
        value = "".join(self._text)[:MAX_VALUE]
        if not value:
            return
        t = attrs.get("t", "n")
        style = attrs.get("s", "0")
        if t == "n" and not (style.isdigit() and int(style) in self.date_styles):
            kind = "number"
        elif t == "s":
            kind = "shared"
        elif t == "b":
            kind, value = "text", "True" if value == "1" else "False"
        else:
            kind = "text"
        self._row_has_value = True
        self.width = max(self.width, self._column)
        if self._row == 1:
            self.header.append(_Cell(self._column, kind, value))
        else:
            self.numbers[self._column] = self.numbers.get(self._column, True) and kind == "number"

    def _end_row(self) -> None:
        self.rows_seen += 1
        if self._row_has_value:
            self.last_row = max(self.last_row, self._row)
        if self.rows_seen >= SAMPLE_ROWS:
            self.stop_at = self.where()


def _scan_rest(chunks: Iterator[bytes], head: bytes, prefix: str) -> int | None:
    """The last row number that holds a value in the sheet's bytes after the sampled rows, by
    scanning for the last closing value tag of each chunk and the row tag before it; None when a
    row carries no number or outgrows ``MAX_ROW_XML``."""
    p = prefix.encode()
    row_tag, ends = b"<" + p + b"row", (b"</" + p + b"v>", b"</" + p + b"is>")
    last = 0
    carry = b""
    for chunk in itertools.chain((head,), chunks):
        buf = carry + chunk
        value_end = max(buf.rfind(e) for e in ends)
        if value_end >= 0:
            start = buf.rfind(row_tag, 0, value_end)
            if start >= 0:
                m = _ROW_NUMBER.search(buf, start + len(row_tag), buf.find(b">", start))
                if m is None:
                    return None
                last = max(last, int(m.group(1)))
        tail = buf.rfind(row_tag)
        carry = buf[tail:] if tail >= 0 else buf
        if len(carry) > MAX_ROW_XML:
            return None
    return last


def _header_names(z: zipfile.ZipFile, part: str | None, header: list[_Cell]) -> dict[int, str]:
    wanted = {int(c.value) for c in header if c.kind == "shared" and c.value.isdigit()}
    strings: dict[int, str] = {}
    if wanted:
        if part is None:
            raise ValueError("its header uses shared strings, and it has none")
        index = -1
        text: list[str] | None = None
        state = {"phonetic": False, "collect": False}

        def start(name: str, _: dict[str, str]) -> None:
            nonlocal index, text
            local = _local(name)
            if local == "si":
                index += 1
                text = [] if index in wanted else None
            elif local == "rPh":
                state["phonetic"] = True
            elif local == "t" and not state["phonetic"]:
                state["collect"] = True

        def end(name: str) -> None:
            local = _local(name)
            if local == "t":
                state["collect"] = False
            elif local == "rPh":
                state["phonetic"] = False
            elif local == "si" and text is not None:
                strings[index] = "".join(text)

        def chars(data: str) -> None:
            if text is not None and state["collect"]:
                text.append(data)

        _parse(z, part, _parser(start, end, chars), done=lambda: len(strings) >= len(wanted))
    names: dict[int, str] = {}
    for c in header:
        if c.kind == "shared":
            names[c.column] = strings.get(int(c.value), "") if c.value.isdigit() else ""
        elif c.kind == "number":
            names[c.column] = _number_name(c.value)
        else:
            names[c.column] = c.value
    return names


def _number_name(text: str) -> str:
    """A number as pandas names a column after it: ``120`` for 120.0, ``9.5``."""
    try:
        n = float(text)
    except ValueError:
        return text
    return str(int(n)) if n.is_integer() else str(n)


def _describe(z: zipfile.ZipFile) -> tuple[int, list[str], list[int]] | None:
    sheet_part, styles_part, strings_part = _first_sheet(z)
    sheet = _Sheet(_date_styles(z, styles_part))
    parser = _parser(sheet.start, sheet.end, sheet.text)
    sheet.where = lambda: parser.CurrentByteIndex
    fed = 0
    with z.open(sheet_part) as stream:
        chunks = _chunks(stream, MAX_SHEET_XML)
        head: bytes | None = None
        try:
            for chunk in chunks:
                fed += len(chunk)
                parser.Parse(chunk, False)
                if sheet.stop_at is not None:  # the sample is read: scan the rest
                    head = chunk[max(sheet.stop_at - (fed - len(chunk)), 0):]
                    break
                if fed >= MAX_SAMPLE_XML:  # enough cell by cell: scan on from the last row begun
                    row_tag = b"<" + sheet.prefix.encode() + b"row"
                    head = chunk[max(chunk.rfind(row_tag), 0):]
                    break
            else:
                parser.Parse(b"", True)
        except expat.ExpatError as exc:
            raise ValueError(f"its sheet {sheet_part} is not XML ({exc})") from None
        if head is not None:
            if not sheet.rows_seen:  # its first row alone passes the cap
                return None
            last = _scan_rest(chunks, head, sheet.prefix)
            if last is None:
                return None
            sheet.last_row = max(sheet.last_row, last)
    names = _header_names(z, strings_part, sheet.header)
    numeric = [i for i in range(sheet.width) if sheet.numbers.get(i + 1, False)]
    return max(sheet.last_row - 1, 0), [names.get(i + 1, "") for i in range(sheet.width)], numeric


def describe(data: bytes) -> tuple[int, list[str], list[int]] | None:
    """Rows, the header row's names as written (blank or repeated ones as they are) and the
    positions of the numeric columns, of the workbook ``data``'s first sheet; ``None`` when the
    workbook is too large to describe within the caps; ``ValueError`` when it is not a workbook."""
    if data[:4] != b"PK\x03\x04":
        raise ValueError("an .xlsx file is a zip archive, and this is not one")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            if len(z.infolist()) > MAX_ENTRIES:
                raise ValueError(f"it holds more than {MAX_ENTRIES} parts")
            if not {"[Content_Types].xml", "xl/workbook.xml"} <= set(z.NameToInfo):
                raise ValueError("it is a zip archive but not a workbook (no xl/workbook.xml)")
            return _describe(z)
    except FileTooLarge:
        return None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError, NotImplementedError,
            zlib.error, lzma.LZMAError) as exc:  # a broken, encrypted or oddly compressed archive
        raise ValueError(f"its archive cannot be read ({exc})") from None


__all__ = ["MAX_SHEET_XML", "SAMPLE_ROWS", "describe"]
