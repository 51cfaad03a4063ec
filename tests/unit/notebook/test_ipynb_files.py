"""The data files an ``.ipynb`` export carries (issue 26, item 6): in ``metadata.turnstream.files``,
base64, up to ``EMBED_BYTES`` together (a file past the cap is listed without its bytes), under
what an import accepts; an import gives them back, and keeps the cell that reads them only when
one did not come along (so that running it names the file to upload)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from turnstream.notebook import ipynb
from turnstream.notebook.files import FileInfo
from turnstream.notebook.model import Cell
from turnstream.server.api import MAX_BODY


def info(name: str, data: bytes) -> FileInfo:
    return FileInfo(name=name, variable=name.split(".")[0], format="csv", bytes=len(data),
                    sha256=hashlib.sha256(data).hexdigest())


FILES = {"a.csv": b"x\n1\n2\n", "b.csv": b"y\n3\n4\n", "c.csv": b"z\n5\n"}  # 6, 6 and 4 bytes


def test_files_are_carried_in_order_while_they_fit_under_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipynb, "EMBED_BYTES", 10)
    carried = ipynb.embedded([info(n, d) for n, d in FILES.items()], FILES)
    assert [(f["name"], "data" in f) for f in carried] == [("a.csv", True), ("b.csv", False), ("c.csv", True)]
    assert base64.b64decode(carried[0]["data"]) == FILES["a.csv"]
    assert base64.b64decode(carried[2]["data"]) == FILES["c.csv"]


def test_what_an_export_may_carry_imports_under_the_body_limit() -> None:
    assert ipynb.EMBED_BYTES == 8 * 2**20  # the cap docs/notebook.md and the OpenAPI summary give
    assert len(base64.b64encode(b"\0" * ipynb.EMBED_BYTES)) < MAX_BODY - 2**20  # room for cells and outputs


def test_an_import_gives_back_what_the_export_carried() -> None:
    cells = [Cell("c1", "units = a.x.sum()")]
    doc = ipynb.to_ipynb(cells, [info(n, d) for n, d in FILES.items()], title="t", data=FILES)
    back, files = ipynb.read_ipynb(json.dumps(doc).encode())
    assert files == list(FILES.items())
    assert [c.code for c in back] == ["units = a.x.sum()"]  # every file came along: no file-reading cell


def test_an_import_missing_a_file_keeps_the_cell_that_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipynb, "EMBED_BYTES", 10)
    doc = ipynb.to_ipynb([Cell("c1", "a")], [info(n, d) for n, d in FILES.items()], data=FILES)
    back, files = ipynb.read_ipynb(json.dumps(doc).encode())
    assert [name for name, _ in files] == ["a.csv", "c.csv"]
    assert len(back) == 2 and "b = pd.read_csv('b.csv')" in back[0].code.replace('"', "'"), back[0].code
