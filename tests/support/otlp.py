"""An OTLP/HTTP receiver for the tracing tests: what a real ``turnstream serve`` exports."""

from __future__ import annotations

import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver:
    """An OTLP/HTTP endpoint: every POST body, by path, on a queue."""

    def __init__(self) -> None:
        self.got: queue.Queue[tuple[str, bytes]] = queue.Queue()
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                got.put((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def attrs(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = list(x.string_value for x in v.array_value.values) if kind == "array_value" else getattr(v, kind)
    return out


def spans_until(receiver: Receiver, done: Any, timeout: float = 30.0) -> list[Any]:
    """The spans received until ``done(spans)`` holds (metrics are skipped)."""
    spans: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(spans):
        path, body = receiver.got.get(timeout=max(0.1, deadline - time.monotonic()))
        if path == "/v1/traces":
            req = ExportTraceServiceRequest.FromString(body)
            spans += [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return spans


__all__ = ["Receiver", "attrs", "spans_until"]
