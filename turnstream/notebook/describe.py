"""Describing an uploaded data file inside the sandbox: its rows, its columns as pandas names
them, and its numeric columns.

The server itself only sniffs a file (``files.sniff``: the name, text or binary marks, the size
caps) and never parses a spreadsheet, a Parquet footer or a deep JSON document: a hostile file
meets pandas, openpyxl and DuckDB in a short-lived sandboxed process, under the kernel's memory
and time limits, with the same ``load_expr`` a cell's kernel reads it with. What that process
cannot read is a refusal naming the file (``ValueError``, shown as 422); a process that cannot
start at all (no sandbox here) leaves the file undescribed, as cells cannot run then either.

The process is a kernel of its own, outside any notebook, admitted by the manager's pool like
any kernel and stopped as soon as the upload is described.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidValue, KernelError
from .config import KernelLimits, SandboxConfig
from .files import FileInfo, load_expr
from .kernel import Kernel

if TYPE_CHECKING:
    from .pool import KernelPool

log = logging.getLogger(__name__)

WHAT = {"csv": "CSV", "tsv": "TSV (tab-separated)", "json": "a JSON table", "parquet": "a Parquet file",
        "xlsx": "an Excel workbook"}
_CODE = """import json as _json
import pandas as pd
{extra}_frame = {expr}
if not isinstance(_frame, pd.DataFrame):
    raise ValueError("it does not read as a table")
print(_json.dumps({{"rows": int(len(_frame)), "columns": [str(c) for c in _frame.columns],
                    "numeric": [str(c) for c in _frame.select_dtypes(include="number", exclude="timedelta").columns]}}))
"""


def describe_code(fmt: str, name: str) -> str:
    """The cell the describing process runs for file ``name``: one JSON line on stdout."""
    extra = "import duckdb\n" if fmt == "parquet" else ""
    return _CODE.format(extra=extra, expr=load_expr(fmt, name))


def _shape(info: FileInfo, outputs: list[Any]) -> tuple[int, list[str], list[str]]:
    text = "".join(o["text"] for o in outputs if o.get("type") == "stdout")
    try:
        doc = json.loads(text)
        rows, columns, numeric = doc["rows"], doc["columns"], doc["numeric"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{info.name} could not be described") from None
    if not (isinstance(rows, int) and all(isinstance(c, str) for c in [*columns, *numeric])):
        raise ValueError(f"{info.name} could not be described")
    return rows, list(columns), list(numeric)


def _refusal(info: FileInfo, outputs: list[Any], limits: KernelLimits) -> str:
    err = next((o for o in outputs if o.get("type") == "error"), None)
    what = WHAT.get(info.format, info.format)
    if err is None:
        return f"{info.name} is not {what}"
    if err.get("timed_out"):
        why = f"reading it took longer than {limits.time_limit:g} s"
    elif err["ename"] in ("MemoryError", "KernelDied", "OutputTooLarge"):
        why = "reading it needs more memory than a notebook's kernel has"
    else:
        why = f"{err['ename']}: {err['evalue']}"[:400]
    return f"{info.name} is not {what} the notebook can read: {why}"


async def describe(infos: Sequence[FileInfo], data: Sequence[bytes], limits: KernelLimits,
                   sandbox: SandboxConfig, pool: KernelPool | None = None) -> list[FileInfo]:
    """``infos`` with their shapes, read in one sandboxed process; ``InvalidValue`` (naming the
    file) for the first that does not read as its format. Undescribed when no process starts."""
    kernel = Kernel(limits, sandbox=sandbox, pool=pool)
    out: list[FileInfo] = []
    try:
        for i, (info, content) in enumerate(zip(infos, data, strict=True)):
            try:
                await kernel.put_file(info.name, content)
                result = await kernel.execute(describe_code(info.format, info.name),
                                              filename=f"<describe {info.name}>")
            except KernelError as exc:
                log.warning("data file %s stays undescribed: %s", info.name, exc)
                out.append(info)
                continue
            if result.status != "success":
                raise InvalidValue(f"files[{i}]", _refusal(info, list(result.outputs), limits))
            try:
                rows, columns, numeric = _shape(info, list(result.outputs))
            except ValueError as exc:
                raise InvalidValue(f"files[{i}]", str(exc)) from None
            out.append(info.described(rows, columns, numeric))
    finally:
        await kernel.aclose()
        if pool is not None:
            pool.forget(kernel)
    return out


__all__ = ["describe", "describe_code"]
