"""Declaring routes once: the Starlette route, its body model and its OpenAPI entry.

Starlette has no OpenAPI generator, so each endpoint is declared with ``Api.route`` and the
schema is built from the same declaration (pydantic models for bodies and responses). The
wrapper around every handler authenticates the caller and parses the body, so a handler
starts with a ``User`` and a validated model, and every refusal has one shape (errors.py).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message

from ..json_depth import MAX_DEPTH, too_deep
from ..store import User
from .auth import ID_PATTERN
from .errors import ApiError, from_validation, invalid_field, too_large
from .models import ErrorOut
from .state import AppState

M = TypeVar("M", bound=BaseModel)
MAX_BODY = 16 * 1024 * 1024


@dataclass(slots=True)
class Call:
    """One request as a handler sees it."""

    request: Request
    state: AppState
    user: User
    body: BaseModel | None

    def param(self, name: str) -> str:
        return str(self.request.path_params[name])

    def parsed(self, model: type[M]) -> M:
        assert isinstance(self.body, model)
        return self.body


Handler = Callable[[Call], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Reply:
    description: str
    model: type[BaseModel] | None = None
    media_type: str = "application/json"
    schema: dict[str, Any] | None = None
    """The body's schema where no model gives it (a document of another media type); an
    event stream's is ``SSE_EVENT``'s, a body of any other type is a string."""


SSE_EVENT = {"type": "object", "description": "One server-sent event: the SSE fields of one event.",
             "properties": {"event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"},
                            "retry": {"type": "integer"}}}
ID_PARAM = {"type": "string", "pattern": ID_PATTERN}
"""A session's or turn's id in a path (others are answered 404 without a lookup)."""


@dataclass(slots=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    body: type[BaseModel] | None
    replies: dict[int, Reply]
    headers: dict[str, str] = field(default_factory=dict)
    """Request headers it reads: name -> description."""
    query: dict[str, str] = field(default_factory=dict)
    """Query parameters it reads: name -> description."""
    auth: bool = True
    raw_body: dict[str, Any] | None = None
    """A body the handler reads itself (multipart, a file): its OpenAPI ``content``. Beside
    ``body``, a request of a media type listed here reaches the handler unread (``Call.body``
    None) and one of any other type is parsed as ``body``."""
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The schema of a path, query or header parameter, by name, where it is not any string
    (``session_id`` and ``turn_id`` are ``ID_PARAM``)."""


async def read_body(request: Request, model: type[M]) -> M:
    raw = b""
    try:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise ApiError(413, "too_large", f"the request body is larger than {MAX_BODY} bytes")
    except ClientDisconnect:
        raise ApiError(400, "client_disconnect", "the client went away before sending its body") from None
    if not raw.strip():
        raw = b"{}"  # so that a missing body names its missing fields
    if too_deep(raw):
        raise invalid_field(["body"], f"the JSON is nested deeper than {MAX_DEPTH} levels", "json_too_deep")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise from_validation(exc) from None


def capped(request: Request, limit: int, what: str) -> Request:
    """``request`` whose body ends in 413 once it passes ``limit`` bytes (for a handler that reads
    its own body, e.g. a multipart form); ``what`` says whose limit it is."""
    seen = 0
    receive = request.receive

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(f"the body is larger than {limit} bytes, more than {what}")
        return message

    return Request(request.scope, counted)


def is_form(request: Request) -> bool:
    return request.headers.get("content-type", "").startswith("multipart/form-data")


class Api:
    """The endpoints of the HTTP API, in declaration order (``API`` below holds them)."""

    def __init__(self) -> None:
        self.endpoints: list[Endpoint] = []

    def route(self, method: str, path: str, *, summary: str, body: type[BaseModel] | None = None,
              replies: dict[int, Reply] | None = None, headers: dict[str, str] | None = None,
              query: dict[str, str] | None = None, auth: bool = True,
              raw_body: dict[str, Any] | None = None,
              params: dict[str, dict[str, Any]] | None = None) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            self.endpoints.append(Endpoint(method, path, fn, summary, body, replies or {}, headers or {},
                                           query or {}, auth, raw_body, params or {}))
            return fn
        return register

    def routes(self, state: AppState) -> list[Route]:
        """One route per path, so that a method the path does not take is a 405 whose
        ``Allow`` lists every method it takes (Starlette lists those of one route only)."""
        by_path: dict[str, dict[str, Endpoint]] = {}
        for ep in self.endpoints:
            by_path.setdefault(ep.path, {})[ep.method] = ep
        return [Route(path, _by_method({m: _wrap(ep, state) for m, ep in eps.items()}), methods=_EVERY_METHOD,
                      name=next(iter(eps.values())).handler.__name__)
                for path, eps in by_path.items()]

    def _param_schema(self, ep: Endpoint, name: str) -> dict[str, Any]:
        if name in ep.params:
            return ep.params[name]
        return dict(ID_PARAM) if name in ("session_id", "turn_id") else {"type": "string"}

    # OpenAPI -----------------------------------------------------------------------------
    def _session_links(self) -> dict[str, Any]:
        """A new session's id feeds every operation on one session (for clients and fuzzers)."""
        return {f"{ep.handler.__name__}": {"operationId": ep.handler.__name__,
                                           "parameters": {"session_id": "$response.body#/id"}}
                for ep in self.endpoints if re.findall(r"{(\w+)}", ep.path) == ["session_id"]}

    def openapi(self, *, title: str, version: str) -> dict[str, Any]:
        models: list[type[BaseModel]] = [ErrorOut]
        for ep in self.endpoints:
            if ep.body is not None:
                models.append(ep.body)
            models.extend(r.model for r in ep.replies.values() if r.model is not None)
        unique = list(dict.fromkeys(models))
        refs, defs = models_json_schema([(m, "validation") for m in unique],
                                        ref_template="#/components/schemas/{model}")
        ref = {m: refs[(m, "validation")] for m in unique}
        paths: dict[str, dict[str, Any]] = {}
        for ep in self.endpoints:
            op: dict[str, Any] = {"summary": ep.summary, "operationId": ep.handler.__name__}
            params: list[dict[str, Any]] = [
                {"name": n, "in": "path", "required": True, "schema": self._param_schema(ep, n)}
                for n in re.findall(r"{(\w+)}", ep.path)]
            params += [{"name": h, "in": "header", "required": False, "description": d,
                        "schema": self._param_schema(ep, h)} for h, d in ep.headers.items()]
            params += [{"name": q, "in": "query", "required": False, "description": d,
                        "schema": self._param_schema(ep, q)} for q, d in ep.query.items()]
            if params:
                op["parameters"] = params
            if ep.body is not None or ep.raw_body is not None:
                body = {"application/json": {"schema": ref[ep.body]}} if ep.body is not None else {}
                # A body whose every field has a default may be left out: it is read as {}.
                required = ep.body is None or any(f.is_required() for f in ep.body.model_fields.values())
                op["requestBody"] = {"required": required, "content": {**body, **(ep.raw_body or {})}}
            responses: dict[str, Any] = {}
            for status, reply in ep.replies.items():
                content: dict[str, Any] = {}
                if reply.model is not None:
                    content[reply.media_type] = {"schema": ref[reply.model]}
                elif reply.schema is not None:
                    content[reply.media_type] = {"schema": reply.schema}
                elif reply.media_type == "text/event-stream":
                    content[reply.media_type] = {"schema": SSE_EVENT}
                elif reply.media_type != "application/json":
                    content[reply.media_type] = {"schema": {"type": "string"}}
                responses[str(status)] = {"description": reply.description, **({"content": content} if content else {})}
                if ep.method == "POST" and ep.path == "/api/sessions" and status == 201:
                    responses[str(status)]["links"] = self._session_links()
            for status, desc in _ERRORS.items():
                if status == 401 and not ep.auth:
                    continue
                if status in (409, 404) and status not in ep.replies and "{" not in ep.path and ep.body is None:
                    continue
                if status == 413 and ep.body is None and ep.raw_body is None:
                    continue
                responses.setdefault(str(status), {"description": desc,
                                                   "content": {"application/json": {"schema": ref[ErrorOut]}}})
            op["responses"] = responses
            if ep.auth:
                op["security"] = [{"bearer": []}]
            paths.setdefault(ep.path, {})[ep.method.lower()] = op
        return {
            "openapi": "3.1.0",
            "info": {"title": title, "version": version},
            "paths": paths,
            "components": {"schemas": defs.get("$defs", {}),
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        }


API = Api()
_ERRORS = {401: "No valid API key.", 404: "Not found (or not yours).", 409: "Conflict with the turn's state.",
           413: f"The body is larger than {MAX_BODY} bytes, or a part of it over its own limit.",
           422: "Invalid input; the message names the field."}
OVERLOADED = {503: Reply("At capacity: the turn could not start within TURNSTREAM_ADMIT_WAIT_S; nothing "
                         "was stored; try again (here or on another server) after Retry-After seconds.", ErrorOut)}
"""The extra reply of the routes that start a turn (admission.py)."""


_EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"]
"""What a route lets through to ``_by_method``, which answers a method its path does not take."""


def _by_method(handlers: dict[str, Callable[[Request], Awaitable[Response]]]
               ) -> Callable[[Request], Awaitable[Response]]:
    allow = ", ".join(handlers)

    async def endpoint(request: Request) -> Response:
        handler = handlers.get(request.method)
        if handler is None:
            raise HTTPException(405, headers={"Allow": allow})
        return await handler(request)

    return endpoint


def _wrap(ep: Endpoint, state: AppState) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        user = await state.auth.require(request.headers) if ep.auth else User("", "")
        unread = ep.raw_body is not None and is_form(request) and "multipart/form-data" in ep.raw_body
        body = await read_body(request, ep.body) if ep.body is not None and not unread else None
        request.state.user = user.name
        return await ep.handler(Call(request, state, user, body))

    return endpoint


__all__ = ["API", "ID_PARAM", "OVERLOADED", "SSE_EVENT", "Api", "Call", "Reply", "capped", "is_form"]
