"""A notebook as a Jupyter notebook (nbformat v4), both ways.

Export (``to_ipynb``): a notebook that runs in a plain Jupyter kernel with its data files
beside it, and that comes back whole when imported here.

* When the notebook has data files, a first cell reads each into its variable, as the kernel
  does on demand (``files.load_expr``); it is marked ``metadata.turnstream.role = "files"``.
* The files themselves travel in ``metadata.turnstream.files`` (``[{"name", "data"}]``, ``data``
  base64) as long as they come to at most ``EMBED_BYTES`` together (in order; a file past the
  cap is listed without ``data``), so that an export imports under the server's body limit.
* A Python cell is a code cell; a SQL cell is a code cell that runs the same statement
  through DuckDB over the notebook's DataFrames (DuckDB finds them by name, as the kernel's
  SQL cells do), with ``{{name}}`` parameters bound the same way, its result stored under its
  ``-- name:`` and shown. Each cell keeps its id, language and (for SQL) its own code under
  ``metadata.turnstream``, which is what the import reads back.
* Outputs go along: printed text as ``stream``, values as ``execute_result`` (``text/plain``,
  tables also ``text/html``), Plotly figures as ``display_data`` with the
  ``application/vnd.plotly.v1+json`` bundle, errors as ``error``.

Import (``read_ipynb``): code cells become Python cells (SQL cells when their metadata says so),
markdown and raw cells become Python cells of comments (this notebook has no text cells; the
words are kept), outputs come along where they map, and nothing is run. Embedded data files come
back as uploads; the cell that read them is dropped when every file came along (the kernel
reads them on demand) and kept otherwise, so that running it names the file to upload.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..errors import InvalidValue, MissingExtraError
from ..json_depth import loads
from ..schema_check import check
from . import sqltext
from .files import FileInfo, load_expr
from .model import Cell, Output, new_cell_id

MIME_PLOTLY = "application/vnd.plotly.v1+json"
NOTEBOOK = {"type": "object", "description": "A Jupyter notebook (nbformat 4; versions 1 to 3 are converted on "
                                            "import, and nbformat's own validation decides what is one).",
            "properties": {"cells": {"type": "array", "items": {"type": "object"}}, "metadata": {"type": "object"},
                           "nbformat": {"type": "integer", "minimum": 1, "maximum": 4},
                           "nbformat_minor": {"type": "integer", "minimum": 0}}}
"""The top level of a notebook, as the API document gives it and the import checks it first
(nbformat converts an old version without looking at it)."""
SQL_HEADER = "# SQL cell (turnstream): the statement runs in DuckDB over this notebook's DataFrames."
EMBED_BYTES = 8 * 2**20
"""Data files an export carries, together (base64 makes them a third larger; imports take 16 MiB)."""


def _nbformat() -> Any:
    try:
        import nbformat
    except ImportError as exc:
        raise MissingExtraError("notebook", "nbformat") from exc
    return nbformat


def _py_string(text: str) -> str:
    """``text`` as a Python string literal that reads well (triple quotes when it can)."""
    if '"""' not in text and not text.endswith(('"', "\\")) and "\\" not in text:
        return f'"""{text}"""'
    return repr(text)


def sql_source(code: str) -> str:
    """The Python that runs SQL cell ``code`` in Jupyter."""
    pos = sqltext.to_positional(code)
    params = f", [{', '.join(pos.names)}]" if pos.names else ""
    query = f"duckdb.execute({_py_string(pos.sql.strip())}{params}).df()"
    name = sqltext.result_name(code)
    body = f"{name} = {query}\n{name}" if name else query
    return f"{SQL_HEADER}\nimport duckdb\n\n{body}"


def files_source(files: Sequence[FileInfo]) -> str:
    lines = ["# The data files of this notebook (turnstream): keep them beside this .ipynb.",
             "import pandas as pd"]
    if any(f.format == "parquet" for f in files):
        lines.append("import duckdb")
    lines += [f"{f.variable} = {load_expr(f.format, f.name)}" for f in files]
    return "\n".join(lines)


def _outputs(outputs: Sequence[Output], count: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for o in outputs:
        if o["type"] in ("stdout", "stderr"):
            out.append({"output_type": "stream", "name": o["type"], "text": o["text"]})
        elif o["type"] == "text":
            out.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                        "data": {"text/plain": o["text"]}})
        elif o["type"] == "table":
            out.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                        "data": {"text/html": o["html"], "text/plain": o["text"]}})
        elif o["type"] == "plotly":
            out.append({"output_type": "display_data", "metadata": {},
                        "data": {MIME_PLOTLY: o["figure"], "text/plain": "<Plotly figure>"}})
        elif o["type"] == "error":
            out.append({"output_type": "error", "ename": o["ename"], "evalue": o["evalue"],
                        "traceback": o["traceback"].splitlines()})
    return out


def embedded(files: Sequence[FileInfo], data: Mapping[str, bytes]) -> list[dict[str, str]]:
    """``metadata.turnstream.files``: each file, with its bytes while they fit in ``EMBED_BYTES``."""
    out: list[dict[str, str]] = []
    left = EMBED_BYTES
    for f in files:
        item = {"name": f.name}
        content = data.get(f.name)
        if content is not None and len(content) <= left:
            item["data"] = base64.b64encode(content).decode("ascii")
            left -= len(content)
        out.append(item)
    return out


def to_ipynb(cells: Sequence[Cell], files: Sequence[FileInfo], *, title: str = "",
             data: Mapping[str, bytes] | None = None) -> dict[str, Any]:
    """The notebook as an nbformat v4 document (validated), carrying the files in ``data``."""
    nbformat = _nbformat()
    v4 = nbformat.v4
    nb = v4.new_notebook()
    top: dict[str, Any] = {"title": title, "format": 1}
    if files:
        top["files"] = embedded(files, data or {})
    nb.metadata.update({"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                        "language_info": {"name": "python"},
                        "turnstream": top})
    if files:
        setup = v4.new_code_cell(files_source(files))
        setup.metadata["turnstream"] = {"role": "files"}
        nb.cells.append(setup)
    for cell in cells:
        source = sql_source(cell.code) if cell.language == "sql" else cell.code
        code = v4.new_code_cell(source, execution_count=cell.execution_count)
        meta: dict[str, Any] = {"id": cell.id, "language": cell.language}
        if cell.language == "sql":
            meta["code"] = cell.code
        code.metadata["turnstream"] = meta
        code.outputs = [nbformat.from_dict(o) for o in _outputs(cell.outputs, cell.execution_count)]
        nb.cells.append(code)
    nbformat.validate(nb)
    return cast(dict[str, Any], json.loads(nbformat.writes(nb)))


def _import_outputs(outputs: list[Any]) -> list[Output]:
    out: list[Output] = []
    for o in outputs:
        kind = o.get("output_type")
        if kind == "stream" and o.get("name") in ("stdout", "stderr"):
            out.append({"type": o["name"], "text": str(o.get("text", ""))})
        elif kind == "error":
            out.append({"type": "error", "ename": str(o.get("ename", "")), "evalue": str(o.get("evalue", "")),
                        "traceback": "\n".join(o.get("traceback") or [])})
        elif kind in ("execute_result", "display_data"):
            data = o.get("data") or {}
            if isinstance(data.get(MIME_PLOTLY), dict):
                out.append({"type": "plotly", "figure": dict(data[MIME_PLOTLY])})
            elif "text/plain" in data:
                out.append({"type": "text", "text": str(data["text/plain"])})
    return out


def _carried_files(metadata: Any) -> tuple[list[tuple[str, bytes]], bool]:
    """The data files an export carries, and whether it carries every file it lists."""
    listed = ((metadata or {}).get("turnstream") or {}).get("files")
    if not isinstance(listed, list):
        return [], not listed
    out: list[tuple[str, bytes]] = []
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InvalidValue("notebook", f"metadata.turnstream.files[{i}] must be an object with a name")
        if not isinstance(item.get("data"), str):
            continue
        try:
            out.append((item["name"], base64.b64decode(item["data"], validate=True)))
        except (binascii.Error, ValueError):
            raise InvalidValue("notebook", f"metadata.turnstream.files[{i}].data ({item['name']}) is not "
                                           "base64") from None
    return out, len(out) == len(listed)


def from_ipynb(raw: bytes) -> list[Cell]:
    """The cells of a Jupyter notebook (see ``read_ipynb``)."""
    return read_ipynb(raw)[0]


def read_ipynb(raw: bytes) -> tuple[list[Cell], list[tuple[str, bytes]]]:
    """The cells of a Jupyter notebook (any nbformat version nbformat reads, converted to v4)
    and the data files it carries (name, bytes; unchecked). ``InvalidValue`` (field
    ``notebook``) when it is not a valid notebook, or nests deeper than ``json_depth.MAX_DEPTH``."""
    nbformat = _nbformat()
    check(NOTEBOOK, loads(raw, "notebook"), "notebook")
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidValue("notebook", f"not a Jupyter notebook: {exc}") from None
    except nbformat.ValidationError as exc:
        raise InvalidValue("notebook", f"not a valid Jupyter notebook: {exc.message}") from None
    files, whole = _carried_files(nb.get("metadata"))
    cells: list[Cell] = []
    for c in nb.cells:
        meta = (c.get("metadata") or {}).get("turnstream") or {}
        source = c.get("source") or ""
        if meta.get("role") == "files" and whole:
            continue  # the files came along: the kernel reads them when a cell uses them
        if c.cell_type == "code":
            if meta.get("language") == "sql" and isinstance(meta.get("code"), str):
                cells.append(Cell(new_cell_id(), meta["code"], "sql", edited_by="user",
                                  outputs=_import_outputs(c.get("outputs") or [])))
            else:
                cells.append(Cell(new_cell_id(), source, "python", edited_by="user",
                                  outputs=_import_outputs(c.get("outputs") or [])))
        else:
            text = "\n".join(f"# {line}".rstrip() for line in source.splitlines())
            cells.append(Cell(new_cell_id(), f"# ({c.cell_type} cell)\n{text}", "python", edited_by="user"))
    return cells, files


__all__ = ["EMBED_BYTES", "MIME_PLOTLY", "NOTEBOOK", "from_ipynb", "read_ipynb", "sql_source", "to_ipynb"]
