"""A server span per HTTP request, continuing the trace of the caller's ``traceparent``.

Installed by the server only when telemetry is on. The span is current while the request
is handled, so a turn the request starts (a task, which copies the context) is part of the
caller's trace. Its name is ``{method} {route}`` once the route is known.
"""

from __future__ import annotations

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .otel import Telemetry


class TraceRequests:
    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        parent = self.telemetry.server_span_context(headers)
        method = scope.get("method", "GET")
        attrs = {"http.request.method": method, "url.path": scope.get("path", ""),
                 "url.scheme": scope.get("scheme", "http")}
        span = self.telemetry.tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes=attrs)
        token = context.attach(trace.set_span_in_context(span, parent))

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                    span.set_attribute("error.type", str(status))
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route:
                span.set_attribute("http.route", route)
                span.update_name(f"{method} {route}")
            span.end()
            context.detach(token)


__all__ = ["TraceRequests"]
