"""Errors the API answers with, and the handlers that keep every failure a clean JSON reply.

Every error body has the same shape::

    {"error": "<code>", "message": "<one sentence naming what is wrong>", "detail": [...]?}

``detail`` appears on validation errors (422): one entry per problem, with ``loc`` (the
path to the field, e.g. ``["body", "client_tools", 0, "name"]``), ``msg`` and ``type``.
The core's refusals are mapped here by their type (``as_api_error``), never by their
text: ``NotFound`` is 404, the state refusals (``TurnNotWaiting``, ``TurnConflictError``,
``SeqConflictError``, ``AlreadyExists``) are 409, ``EditConflict`` is 409 with the current
``cell`` beside the message, ``FileTooLarge`` is 413, ``InvalidValue`` is 422 naming its field,
``Overloaded`` is 503 with ``Retry-After``. An unexpected exception is logged with its
traceback and answered with a JSON body that carries a request id, never a stack trace.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import (
    AlreadyExists,
    ApiError,
    EditConflict,
    FileTooLarge,
    InvalidValue,
    NotFound,
    Overloaded,
    SeqConflictError,
    ShuttingDown,
    StoreError,
    TurnConflictError,
    TurnNotWaiting,
    TurnstreamError,
)

log = logging.getLogger("turnstream.server")


def error_response(exc: ApiError) -> JSONResponse:
    body: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if exc.detail is not None:
        body["detail"] = exc.detail
    body.update(exc.extra or {})
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


def as_api_error(exc: TurnstreamError) -> ApiError | None:
    """The answer for one of the core's refusals, by its type; None for a failure (a 500)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", str(exc))
    if isinstance(exc, EditConflict):
        return ApiError(409, "edit_conflict", str(exc), extra={"cell": exc.cell})
    if isinstance(exc, TurnNotWaiting | TurnConflictError | SeqConflictError | AlreadyExists):
        return conflict(str(exc))
    if isinstance(exc, FileTooLarge):
        return too_large(str(exc))
    if isinstance(exc, InvalidValue):
        return invalid_field(["body", exc.field, *exc.path], exc.message)
    if isinstance(exc, Overloaded | ShuttingDown):
        code = "overloaded" if isinstance(exc, Overloaded) else "shutting_down"
        return ApiError(503, code, str(exc), headers={"Retry-After": str(exc.retry_after)})
    if isinstance(exc, StoreError):  # disk full, the database gone: nothing was stored
        return ApiError(503, "store_unavailable", f"the database cannot take this now ({exc}); try again shortly",
                        headers={"Retry-After": "5"})
    return None


def unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "a valid API key is required: Authorization: Bearer <key>",
                    headers={"WWW-Authenticate": "Bearer"})


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def conflict(message: str) -> ApiError:
    return ApiError(409, "conflict", message)


def too_large(message: str) -> ApiError:
    return ApiError(413, "too_large", message)


def _loc_text(loc: Any) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def invalid(errors: list[dict[str, Any]], where: str = "body") -> ApiError:
    """A 422 from pydantic errors, located under ``where`` (body, query, header)."""
    detail = [{"loc": [where, *e.get("loc", ())], "msg": e.get("msg", "invalid"), "type": e.get("type", "invalid")}
              for e in errors]
    first = detail[0] if detail else {"loc": [where], "msg": "invalid"}
    more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
    return ApiError(422, "validation_error", f"{_loc_text(first['loc'])}: {first['msg']}{more}", detail)


def invalid_field(loc: list[Any], msg: str, type_: str = "value_error") -> ApiError:
    return invalid([{"loc": tuple(loc[1:]), "msg": msg, "type": type_}], where=str(loc[0]))


def from_validation(exc: ValidationError, where: str = "body") -> ApiError:
    return invalid([dict(e) for e in exc.errors(include_url=False, include_input=False)], where)


async def turnstream_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TurnstreamError)
    mapped = as_api_error(exc)
    if mapped is None:
        return await unexpected_error_handler(request, exc)
    return error_response(mapped)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    message = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
    return error_response(ApiError(exc.status_code, codes.get(exc.status_code, "http_error"),
                                   message.get(exc.status_code, str(exc.detail)),
                                   headers=dict(exc.headers) if exc.headers else None))


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    rid = uuid.uuid4().hex[:12]
    log.error("unexpected error on %s %s (request %s)", request.method, request.url.path, rid, exc_info=exc)
    return JSONResponse({"error": "internal_error", "request_id": rid,
                         "message": f"the server failed to answer this request; see its log for request {rid}"},
                        status_code=500)


__all__ = [
    "ApiError",
    "as_api_error",
    "conflict",
    "error_response",
    "from_validation",
    "invalid",
    "invalid_field",
    "not_found",
    "too_large",
    "unauthorized",
]
