"""Errors the API answers with, and the handlers that keep every failure a clean JSON reply.

Every error body has the same shape::

    {"error": "<code>", "message": "<one sentence naming what is wrong>", "detail": [...]?}

``detail`` appears on validation errors (422): one entry per problem, with ``loc`` (the
path to the field, e.g. ``["body", "client_tools", 0, "name"]``), ``msg`` and ``type``.
An unexpected exception is logged with its traceback and answered with a JSON body that
carries a request id, never a stack trace.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

log = logging.getLogger("turnstream.server")


class ApiError(Exception):
    """An answer other than success, raised anywhere below a route."""

    def __init__(self, status: int, code: str, message: str, detail: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
        self.headers = headers

    def response(self) -> JSONResponse:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.detail is not None:
            body["detail"] = self.detail
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "a valid API key is required: Authorization: Bearer <key>",
                    headers={"WWW-Authenticate": "Bearer"})


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def conflict(message: str) -> ApiError:
    return ApiError(409, "conflict", message)


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


async def api_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def http_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    message = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
    return ApiError(exc.status_code, codes.get(exc.status_code, "http_error"),
                    message.get(exc.status_code, str(exc.detail)),
                    headers=dict(exc.headers) if exc.headers else None).response()


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    rid = uuid.uuid4().hex[:12]
    log.error("unexpected error on %s %s (request %s)", request.method, request.url.path, rid, exc_info=exc)
    return JSONResponse({"error": "internal_error", "request_id": rid,
                         "message": f"the server failed to answer this request; see its log for request {rid}"},
                        status_code=500)


__all__ = ["ApiError", "conflict", "from_validation", "invalid", "invalid_field", "not_found", "unauthorized"]
