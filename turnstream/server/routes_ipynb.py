"""The notebook as a Jupyter ``.ipynb`` file: export it with its data files, import one into an
empty notebook and restore the files it carries (``notebook/ipynb.py`` says how cells, SQL,
outputs and files map)."""

from __future__ import annotations

import asyncio
import re

from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from ..errors import ApiError
from ..notebook.ipynb import EMBED_BYTES, NOTEBOOK, read_ipynb, to_ipynb
from .api import API, MAX_BODY, Call, Reply
from .errors import conflict, invalid_field, too_large
from .models import ImportOut
from .routes_notebook import session_notebook

IPYNB = "application/x-ipynb+json"
PATH = "/api/sessions/{session_id}/notebook.ipynb"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@API.route("GET", PATH, summary="The notebook as a Jupyter notebook (nbformat 4, outputs included; its data "
                                 "files in metadata.turnstream.files, base64, up to 8 MiB together)",
           replies={200: Reply("The .ipynb document.", media_type=IPYNB, schema=NOTEBOOK)})
async def export_ipynb(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    session = await call.state.store.get_session(sid)
    title = session.title if session is not None else ""
    nb = await manager.notebook(sid)
    files = await manager.files.infos(sid)
    data = await manager.files.contents(sid, [f.name for f in files], EMBED_BYTES)
    doc = await asyncio.to_thread(to_ipynb, list(nb.cells), files, title=title, data=data)
    stem = _UNSAFE.sub("-", title).strip("-")[:60] or sid
    return JSONResponse(doc, media_type=IPYNB,
                        headers={"Content-Disposition": f'attachment; filename="{stem}.ipynb"'})


@API.route("POST", PATH, summary="Import a Jupyter notebook into this session's empty notebook, with the data files "
                                  "it carries (nothing runs)",
           raw_body={IPYNB: {"schema": NOTEBOOK}, "application/json": {"schema": NOTEBOOK}},
           replies={201: Reply("The imported cells.", ImportOut),
                    409: Reply("The notebook already has cells."), 413: Reply("Larger than 16 MiB.")})
async def import_ipynb(call: Call) -> Response:
    manager, sid = await session_notebook(call)
    raw = bytearray()
    try:
        async for chunk in call.request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise too_large(f"the notebook is larger than {MAX_BODY} bytes")
    except ClientDisconnect:
        raise ApiError(400, "client_disconnect", "the client went away before sending its body") from None
    if not raw.strip():
        raise invalid_field(["body"], "send the .ipynb document as the body")
    cells, files = await asyncio.to_thread(read_ipynb, bytes(raw))
    nb = await manager.notebook(sid)
    if nb.cells:
        raise conflict(f"this notebook already has {len(nb.cells)} cells; import into a new session, or delete "
                       "them first")
    if files:  # checked as any upload is; nothing is imported when one is refused
        await manager.add_files(sid, files)
    await manager.replace_cells(sid, cells)
    return JSONResponse({"cells": [c.to_dict() for c in cells]}, status_code=201)


__all__ = ["IPYNB"]
