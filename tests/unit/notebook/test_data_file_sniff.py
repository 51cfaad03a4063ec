"""What the server itself looks at in an upload (``files.sniff``): marks only, never a parse of a
spreadsheet, a Parquet footer or a JSON document (their shape is read in the sandbox, see
tests/integration/notebook/test_notebook_uploads.py). Also what the offline demo says of a file
whose shape is unknown."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from turnstream.notebook import files
from turnstream.scenarios.engine import RequestView, Scenario


def archive(*parts: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for part in parts:
            z.writestr(part, "<x/>")
    return out.getvalue()


WORKBOOK = archive("[Content_Types].xml", "xl/workbook.xml", "xl/worksheets/sheet1.xml")


@pytest.mark.parametrize(("name", "data"), [
    ("t.csv", b"a,b\n1,2\n"), ("t.tsv", b"a\tb\n1\t2\n"), ("t.json", b' \n[{"a": 1}]'), ("o.json", b'{"a": [1]}'),
    ("t.parquet", b"PAR1" + b"\0" * 8 + b"PAR1"), ("t.xlsx", WORKBOOK), ("bom.csv", b"\xef\xbb\xbfa,b\n1,2\n"),
])
def test_what_looks_like_its_format_passes_with_its_shape_left_to_the_sandbox(name: str, data: bytes) -> None:
    info = files.sniff(name, data)
    assert (info.rows, info.columns, info.numeric_columns) == (None, None, None)
    assert info.bytes == len(data) and info.variable == name.split(".")[0]


@pytest.mark.parametrize(("name", "data", "why"), [
    ("png.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary data"),
    ("latin.csv", "name\ncaf\u00e9\n".encode("latin-1"), "UTF-8"),
    ("blank.csv", b"\n1,2\n", "no column names"),
    ("tabs.csv", b"a\tb\n1\t2\n", "separated by tabs"),
    ("empty.csv", b"", "empty"),
    ("scalar.json", b"42", "not a JSON table"),
    ("text.parquet", b"a,b\n1,2\n", "PAR1"),
    ("short.parquet", b"PAR1PAR1", "PAR1"),
    ("csv.xlsx", b"region,units\nNorth,1\n", "this is not one"),
    ("doc.xlsx", archive("word/document.xml"), "without xl/workbook.xml"),
    ("nosheet.xlsx", archive("xl/workbook.xml"), "no worksheet"),
])
def test_what_does_not_look_like_its_format_is_refused_naming_it(name: str, data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why) as caught:
        files.sniff(name, data)
    assert str(caught.value).startswith(name)


def test_a_deep_json_document_is_not_parsed_on_the_server() -> None:
    deep = b"[" * 1_000_000 + b"]" * 1_000_000  # json.loads would raise RecursionError
    assert files.sniff("deep.json", deep).format == "json"


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
    sniffed = files.sniff("sales.csv", b"region,units\nNorth,1\nSouth,2\n")
    known = sniffed.described(2, ["region", "units"], ["units"]).to_dict()
    said = demo_texts(known)
    assert 'You uploaded sales.csv: 2 rows with the columns ["region", "units"].' in said
    unknown = {**known, "name": "big.xlsx", "variable": "big", "format": "xlsx", "rows": None, "columns": None,
               "numeric_columns": None}
    said = demo_texts(unknown)
    assert "You uploaded big.xlsx; I do not know its rows and columns yet" in said
    assert "`big`" in said and "a bar chart" in said
    for text in (said, demo_texts({**known, "numeric_columns": []})):
        assert "null" not in text and ", ," not in text and "{{" not in text
