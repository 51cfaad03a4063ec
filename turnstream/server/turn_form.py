"""A turn started with ``multipart/form-data``: a ``message`` field and one or more files.

The form is the JSON body's twin for clients that hold files rather than base64 (``curl -F``,
a browser's ``FormData``): the text field ``message`` is checked as ``TurnCreate.message`` is,
and each file (field ``files``, repeated) becomes a content part whose type is the part's
``Content-Type``, or read from its bytes when the client sent none or
``application/octet-stream``. The files then go through the same checks and limits as JSON
parts (``routes_turns.checked_and_stored``); a refusal names ``files[i]``. The body is cut off
with 413 once it passes ``api.MAX_BODY``, as a JSON body is.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect

from ..content import MediaPart, part_of, sniff
from ..errors import ApiError
from .api import MAX_BODY, Call, capped
from .errors import from_validation, invalid_field, too_large
from .models import TurnCreate

FIELDS = ("message", "files")
MAX_FORM_FILES = 100
"""Files the parser takes at most (the server's attachment limit, lower, answers 413 first)."""
FILE_FIELDS = {"media_type": "content_type", "data": "content"}
"""The names a refusal gives a file's type and bytes (``check_parts`` calls them ``media_type``, ``data``)."""
MULTIPART: dict[str, Any] = {"multipart/form-data": {"schema": {
    "type": "object", "required": ["message"],
    "properties": {
        "message": {"type": "string", "minLength": 1, "maxLength": 500_000, "description": "The user's message."},
        "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                  "description": "Images (PNG, JPEG, GIF, WebP) and PDFs, each with its Content-Type "
                                 "(docs/content-parts.md)."}}}}}


async def read_turn_form(call: Call) -> tuple[TurnCreate, list[MediaPart]]:
    """The message and the files of a multipart turn request (the files not checked yet)."""
    request = call.request
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        raise too_large(f"the request body is {declared} bytes, larger than {MAX_BODY} bytes")
    try:
        form = await capped(request, MAX_BODY, "a request body may hold").form(max_files=MAX_FORM_FILES,
                                                                                max_fields=len(FIELDS))
    except ClientDisconnect:
        raise ApiError(400, "client_disconnect", "the client went away before sending its body") from None
    except ApiError:
        raise
    except Exception as exc:  # the multipart parser's own errors (a broken body, too many parts)
        raise invalid_field(["body"], f"not a valid multipart body: {exc}") from None
    message: list[str] = []
    media: list[MediaPart] = []
    try:
        for name, value in form.multi_items():
            if name not in FIELDS:
                raise invalid_field(["body", name], f"not a field of this form; it takes {' and '.join(FIELDS)}")
            if name == "message":
                if isinstance(value, UploadFile) or message:
                    raise invalid_field(["body", "message"], "must be one text field")
                message.append(value)
                continue
            if not isinstance(value, UploadFile):
                raise invalid_field(["body", "files", len(media)], "must be a file (with a filename)")
            data = await value.read()
            declared_type = (value.content_type or "").split(";")[0].strip().lower()
            if declared_type in ("", "application/octet-stream"):
                declared_type = sniff(data) or declared_type or "application/octet-stream"
            media.append(part_of(declared_type, data, value.filename or None))
    finally:
        await form.close()
    try:
        body = TurnCreate.model_validate({"message": message[0] if message else None})
    except ValidationError as exc:
        raise from_validation(exc) from None
    return body, media


__all__ = ["FILE_FIELDS", "MULTIPART", "read_turn_form"]
