"""A notebook's data files over HTTP: upload (multipart), list, delete.

An upload is read as it arrives and cut off with 413 once the body passes what the notebook
may hold (its files' cap, plus room for the multipart framing), so a client cannot make the
server spool an endless body. Every file is checked before any is stored: its name
(``notebook.files``: no path, no leading dot, a known suffix), its size, and its content
against the format its name claims; a refusal names the file (``files[i]``).
"""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from ..errors import ApiError
from ..notebook.files import NAME_PATTERN, check_name
from .api import API, Call, Reply, capped
from .errors import invalid_field, not_found, too_large
from .models import Deleted, FileList
from .routes_notebook import BASE, session_notebook

FRAMING = 1024 * 1024
"""Room for the multipart headers and boundaries beside the files themselves."""
MAX_FILES = 20

MULTIPART = {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"],
    "properties": {"files": {"type": "array", "items": {"type": "string", "format": "binary"},
                             "description": "One or more CSV, TSV, Parquet, JSON or Excel (.xlsx) files; each "
                                            f"file name must match {NAME_PATTERN} and end in its format."}}}}}


async def _read_files(call: Call, limit: int) -> list[tuple[str, bytes]]:
    request = call.request
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(f"the upload is {declared} bytes, more than this notebook's files may take together "
                        f"({limit - FRAMING} bytes)")
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise invalid_field(["body"], "send the files as multipart/form-data")
    try:
        form = await capped(request, limit, "this notebook's files may take together").form(max_files=MAX_FILES,
                                                                                             max_fields=MAX_FILES)
    except ClientDisconnect:
        raise ApiError(400, "client_disconnect", "the client went away before sending its body") from None
    except ApiError:
        raise
    except Exception as exc:  # the multipart parser's own errors (a broken body)
        raise invalid_field(["body"], f"not a valid multipart body: {exc}") from None
    out: list[tuple[str, bytes]] = []
    try:
        for i, (field, value) in enumerate(form.multi_items()):
            if not isinstance(value, UploadFile):
                raise invalid_field(["body", field], "only files are taken here (a form field was sent)")
            name = value.filename or ""
            try:
                check_name(name)
            except ValueError as exc:
                raise invalid_field(["body", "files", i, "filename"], str(exc)) from None
            out.append((name, await value.read()))
    finally:
        await form.close()
    if not out:
        raise invalid_field(["body", "files"], "no file in the request")
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise invalid_field(["body", "files"], "the same file name is sent twice")
    return out


@API.route("POST", BASE + "/files", summary="Upload data files (multipart) into the notebook",
           raw_body=MULTIPART,
           replies={201: Reply("The files, as stored.", FileList),
                    413: Reply("A file, or the notebook's files together, over the limit; nothing was stored."),
                    409: Reply("Another file already gives the same variable name.")})
async def upload_files(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    limits = manager.files.limits
    uploads = await _read_files(call, limits.total_bytes + FRAMING)
    for i, (name, data) in enumerate(uploads):
        if len(data) > limits.file_bytes:
            raise too_large(f"files[{i}]: {name} is {len(data)} bytes, over the limit of {limits.file_bytes} "
                            "bytes for one data file")
    infos = await manager.add_files(sid, uploads)
    return JSONResponse({"files": [f.to_dict() for f in infos]}, status_code=201)


@API.route("GET", BASE + "/files", summary="The notebook's data files", replies={200: Reply("The files.", FileList)})
async def list_files(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    return JSONResponse({"files": [f.to_dict() for f in await manager.files.infos(sid)]})


@API.route("DELETE", BASE + "/files/{name}", summary="Delete a data file", params={"name": {
               "type": "string", "description": "A data file's name (no '..', ending in its format).",
               "pattern": r"^[A-Za-z0-9]([A-Za-z0-9 _-]|\.[A-Za-z0-9 _-]){0,59}\.(csv|tsv|parquet|json|xlsx)$"}},
           replies={200: Reply("Deleted.", Deleted), 404: Reply("No such session or file (or not yours).")})
async def delete_file(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    name = call.param("name")
    try:
        check_name(name)
    except ValueError as exc:
        raise invalid_field(["path", "name"], str(exc)) from None
    if not await manager.delete_file(sid, name):
        raise not_found(f"file {name}")
    return JSONResponse({"deleted": True})


__all__ = ["FRAMING", "MAX_FILES"]
