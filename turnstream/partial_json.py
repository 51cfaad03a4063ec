"""Incremental partial-JSON parsing in linear time.

``PartialJSON`` is fed the fragments of one JSON document as they stream in. It keeps the
raw text exactly (``text``) and tracks just enough structure (open containers, whether it
is inside a string or a key, where the last member began) to turn any prefix into valid
JSON by trimming the unfinished token and closing what is open. Each fragment is scanned
once; inside strings the scan jumps between quotes and backslashes with ``str.find``, so
long code or prose arguments cost C speed. A snapshot (``snapshot()``) parses the repaired
prefix once; callers take snapshots at geometrically spaced sizes, which keeps the total
work linear in the input however small the fragments are.

Written by hand: the libraries that parse partial JSON (jiter's ``partial_mode``,
``partial-json-parser``) re-parse the whole buffer on every call, which is the quadratic
cost this runtime exists to avoid.
"""

from __future__ import annotations

from typing import Any

import orjson

from .json_depth import too_deep

_WS = " \t\r\n"


class PartialJSON:
    __slots__ = (
        "_esc", "_expect", "_in_key", "_in_str", "_joined", "_len", "_member_start",
        "_parts", "_scalar_start", "_stack", "_str_start",
    )

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._joined = ""
        self._len = 0
        self._stack: list[str] = []
        # per open container: where its current (unfinished) member began, for trimming
        self._member_start: list[int] = []
        self._in_str = False
        self._in_key = False
        self._esc = False
        self._str_start = 0
        self._scalar_start = -1
        # what an object expects next: "key", "colon", "value", "comma"; arrays: "value"/"comma"
        self._expect: list[str] = []

    @property
    def text(self) -> str:
        if self._parts:
            self._joined += "".join(self._parts)
            self._parts.clear()
        return self._joined

    def __len__(self) -> int:
        return self._len

    def feed(self, frag: str) -> None:
        base = self._len
        self._parts.append(frag)
        self._len += len(frag)
        i, n = 0, len(frag)
        stack, expect = self._stack, self._expect
        while i < n:
            if self._in_str:
                if self._esc:
                    self._esc = False
                    i += 1
                    continue
                q = frag.find('"', i)
                b = frag.find("\\", i, q if q >= 0 else n)
                if b >= 0:
                    self._esc = True
                    i = b + 1
                    continue
                if q < 0:
                    return
                self._in_str = False
                i = q + 1
                if expect:
                    expect[-1] = "colon" if self._in_key else "comma"
                self._in_key = False
                continue
            c = frag[i]
            if self._scalar_start >= 0:
                if c in _WS or c in ",]}":
                    self._scalar_start = -1
                    if expect:
                        expect[-1] = "comma"
                else:
                    i += 1
                    continue
            if c in _WS:
                pass
            elif c == '"':
                self._in_str = True
                self._str_start = base + i
                if stack and stack[-1] == "{" and expect[-1] == "key":
                    self._in_key = True
                    self._member_start[-1] = base + i
                elif stack and stack[-1] == "[" and expect[-1] == "value":
                    self._member_start[-1] = base + i
            elif c in "{[":
                if stack and stack[-1] == "[" and expect[-1] == "value":
                    self._member_start[-1] = base + i
                stack.append(c)
                expect.append("key" if c == "{" else "value")
                self._member_start.append(base + i + 1)
            elif c in "}]":
                if stack:
                    stack.pop()
                    expect.pop()
                    self._member_start.pop()
                if expect:
                    expect[-1] = "comma"
            elif c == ":":
                if expect:
                    expect[-1] = "value"
            elif c == ",":
                if expect:
                    expect[-1] = "key" if stack[-1] == "{" else "value"
                    self._member_start[-1] = base + i
            else:
                self._scalar_start = base + i
                if stack and stack[-1] == "[" and expect[-1] == "value":
                    self._member_start[-1] = base + i
            i += 1

    def repaired(self) -> str:
        """The text so far made into a complete JSON document (possibly dropping an
        unfinished key, number or literal)."""
        s = self.text
        if not self._stack:
            if self._in_str:
                return _close_string(s) if not self._in_key else ""
            return s.strip() if self._scalar_start < 0 else _complete_scalar(s, self._scalar_start)
        top, want = self._stack[-1], self._expect[-1]
        if self._in_str:
            s = _drop_member(s, self._member_start[-1]) if self._in_key else _close_string(s)
        elif self._scalar_start >= 0:
            done = _complete_scalar(s[self._scalar_start:], 0)
            s = s[: self._scalar_start] + done if done else _drop_member(s, self._member_start[-1])
        elif top == "{" and want in ("colon", "value"):
            s = _drop_member(s, self._member_start[-1])
        else:
            s = s.rstrip()
            if s.endswith(","):
                s = s[:-1]
        return s + "".join("}" if c == "{" else "]" for c in reversed(self._stack))

    def snapshot(self) -> Any:
        """Best-effort value of the document so far (None when nothing usable yet, or when it
        nests deeper than ``json_depth.MAX_DEPTH``)."""
        fixed = self.repaired()
        if not fixed or too_deep(fixed):
            return None
        try:
            return orjson.loads(fixed)
        except orjson.JSONDecodeError:
            return None


def _drop_member(s: str, start: int) -> str:
    """Cut an unfinished object member (or array element) that began at ``start``."""
    s = s[:start].rstrip()
    if s.endswith(","):
        s = s[:-1]
    return s


def _close_string(s: str) -> str:
    # Never end inside an escape: drop a dangling backslash or an incomplete \\uXXXX.
    tail = s[-6:]
    k = tail.rfind("\\")
    if k >= 0:
        run_start = len(s) - len(tail) + k
        # count the backslashes that end at run_start to see if this one is escaped
        j = run_start
        while j > 0 and s[j - 1] == "\\":
            j -= 1
        if (run_start - j) % 2 == 0:
            esc = s[run_start:]
            if len(esc) == 1 or (esc[1] == "u" and len(esc) < 6):
                s = s[:run_start]
    return s + '"'


_LITERALS = ("true", "false", "null")


def _complete_scalar(s: str, start: int) -> str:
    tok = s[start:].strip()
    for lit in _LITERALS:
        if lit.startswith(tok):
            return lit if tok == lit else ""
    try:
        orjson.loads(tok)
    except orjson.JSONDecodeError:
        tok = tok.rstrip("eE+-.")
        if tok in ("", "-"):
            return ""
    return tok
