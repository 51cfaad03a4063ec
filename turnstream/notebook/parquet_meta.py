"""The shape of a Parquet file from its footer alone, read with the standard library.

A Parquet file ends in ``<footer><footer length: 4 bytes LE>PAR1``; the footer is a Thrift
``FileMetaData`` struct in the compact protocol. Of it this reads the row count (field 3) and
the schema (field 2), and steps over everything else without building it, so the server learns
a file's rows, columns and numeric columns without handing hostile bytes to a parsing library.

The reader trusts nothing it reads: the footer must lie inside the file, every length and count
is checked against the bytes that remain before anything is allocated for it, structs and lists
nest at most ``MAX_DEPTH`` deep, and varints are at most 10 bytes. Anything off is a
``ValueError`` (the file is not the Parquet it claims to be).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAX_DEPTH = 64
MAX_COLUMNS = 100_000

# Thrift compact protocol type ids.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# Parquet: physical types that hold numbers, converted and logical types that make them something else.
_NUMBER_TYPES = {1, 2, 4, 5}  # INT32, INT64, FLOAT, DOUBLE
_DECIMAL_CONVERTED = 5
_NOT_A_NUMBER_CONVERTED = {6, 7, 8, 9, 10, 21}  # DATE, TIME_*, TIMESTAMP_*, INTERVAL
_DECIMAL_LOGICAL, _FLOAT16_LOGICAL = 5, 15
_NOT_A_NUMBER_LOGICAL = {6, 7, 8, 11}  # DATE, TIME, TIMESTAMP, UNKNOWN (always null)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("its footer is cut short")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def byte(self) -> int:
        return self.take(1)[0]

    def varint(self) -> int:
        out = 0
        for shift in range(0, 70, 7):
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
        raise ValueError("its footer holds a number longer than 10 bytes")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def count(self, n: int) -> int:
        """A list or map size: every element takes at least one byte, so more than remain is a lie."""
        if n > len(self.buf) - self.pos:
            raise ValueError("its footer claims more items than it holds")
        return n

    def field_header(self, last: int) -> tuple[int, int]:
        """(field id, type) of a struct's next field; type ``_STOP`` at its end."""
        b = self.byte()
        kind = b & 0x0F
        if kind == _STOP:
            return 0, _STOP
        delta = b >> 4
        return (last + delta if delta else self.zigzag()), kind

    def list_header(self) -> tuple[int, int]:
        b = self.byte()
        size = b >> 4
        if size == 15:
            size = self.varint()
        return self.count(size), b & 0x0F

    def skip(self, kind: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ValueError("its footer nests too deep")
        if kind in (_TRUE, _FALSE):
            return
        if kind == _BYTE:
            self.take(1)
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.take(8)
        elif kind == _BINARY:
            self.take(self.varint())
        elif kind in (_LIST, _SET):
            size, elem = self.list_header()
            for _ in range(size):
                self.skip_element(elem, depth + 1)
        elif kind == _MAP:
            size = self.count(self.varint())
            if size:
                kv = self.byte()
                for _ in range(size):
                    self.skip_element(kv >> 4, depth + 1)
                    self.skip_element(kv & 0x0F, depth + 1)
        elif kind == _STRUCT:
            last = 0
            while True:
                last, k = self.field_header(last)
                if k == _STOP:
                    return
                self.skip(k, depth + 1)
        else:
            raise ValueError(f"its footer holds an unknown Thrift type {kind}")

    def skip_element(self, kind: int, depth: int) -> None:
        """A list's or map's element: booleans there take a byte of their own."""
        if kind in (_TRUE, _FALSE):
            self.take(1)
        else:
            self.skip(kind, depth)


@dataclass(slots=True)
class _Element:
    """What this reader keeps of a ``SchemaElement``."""

    name: str = ""
    physical: int | None = None
    children: int = 0
    converted: int | None = None
    logical: int | None = None

    @property
    def numeric(self) -> bool:
        if self.children or self.logical in _NOT_A_NUMBER_LOGICAL or self.converted in _NOT_A_NUMBER_CONVERTED:
            return False
        return (self.physical in _NUMBER_TYPES or self.converted == _DECIMAL_CONVERTED
                or self.logical in (_DECIMAL_LOGICAL, _FLOAT16_LOGICAL))


def _element(r: _Reader) -> _Element:
    out = _Element()
    last = 0
    while True:
        last, kind = r.field_header(last)
        if kind == _STOP:
            return out
        if last == 1 and kind == _I32:
            out.physical = r.zigzag()
        elif last == 4 and kind == _BINARY:
            out.name = r.take(r.varint()).decode("utf-8", "replace")
        elif last == 5 and kind == _I32:
            out.children = r.zigzag()
        elif last == 6 and kind == _I32:
            out.converted = r.zigzag()
        elif last == 10 and kind == _STRUCT:
            out.logical = _union_member(r)
        else:
            r.skip(kind, 1)


def _union_member(r: _Reader) -> int | None:
    """The field id a Thrift union (``LogicalType``) holds."""
    member: int | None = None
    last = 0
    while True:
        last, kind = r.field_header(last)
        if kind == _STOP:
            return member
        member = last
        r.skip(kind, 2)


def _top_level(schema: list[_Element]) -> list[_Element]:
    """The root's children (the columns a reader makes of the file), stepping over nested fields."""
    if not schema or schema[0].children < 0:
        raise ValueError("its schema has no root")
    out: list[_Element] = []
    i = 1
    for _ in range(schema[0].children):
        if i >= len(schema):
            raise ValueError("its schema has fewer fields than it says")
        out.append(schema[i])
        pending = schema[i].children
        i += 1
        while pending > 0:
            if i >= len(schema) or schema[i].children < 0:
                raise ValueError("its schema has fewer fields than it says")
            pending += schema[i].children - 1
            i += 1
    return out


def describe(data: bytes) -> tuple[int, list[str], list[str]]:
    """Rows, columns and numeric columns of the Parquet file ``data``; ``ValueError`` when it is not one."""
    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise ValueError("no PAR1 marks at its start and end")
    (length,) = struct.unpack("<I", data[-8:-4])
    if length == 0 or length > len(data) - 12:
        raise ValueError("its footer length points outside the file")
    r = _Reader(data[-8 - length:-8])
    rows: int | None = None
    schema: list[_Element] | None = None
    last = 0
    while True:
        last, kind = r.field_header(last)
        if kind == _STOP:
            break
        if last == 2 and kind == _LIST:
            size, elem = r.list_header()
            if elem != _STRUCT:
                raise ValueError("its schema is not a list of fields")
            schema = [_element(r) for _ in range(size)]
        elif last == 3 and kind == _I64:
            rows = r.zigzag()
        else:
            r.skip(kind, 1)
    if schema is None or rows is None or rows < 0:
        raise ValueError("its footer has no schema or row count")
    columns = _top_level(schema)
    if len(columns) > MAX_COLUMNS:
        raise ValueError(f"it has {len(columns)} columns, more than {MAX_COLUMNS}")
    return rows, [c.name for c in columns], [c.name for c in columns if c.numeric]


__all__ = ["MAX_COLUMNS", "MAX_DEPTH", "describe"]
