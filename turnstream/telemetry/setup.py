"""The OpenTelemetry SDK set up from the standard variables (imported only when they ask for it).

Traces and metrics go to OTLP over HTTP (protobuf), or to the console
(``OTEL_TRACES_EXPORTER=console``), or nowhere (``none``). The exporters read their own
variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_HEADERS``, ``…_TIMEOUT``), the batch
processor its ``OTEL_BSP_*``, the metric reader ``OTEL_METRIC_EXPORT_INTERVAL``, the
resource ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``. The providers become the
global ones, so that other instrumentation in the process joins the same traces, except the
libraries in ``OWN_SPANS``, whose spans turnstream makes itself.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExportResult

from .otel import Telemetry

log = logging.getLogger("turnstream.telemetry")

OWN_SPANS = frozenset({"mcp-python-sdk"})
"""Instrumentation scopes that get no tracer from the global provider. The MCP SDK spans each
request it sends (``MCP send tools/call …``) beside turnstream's own ``tools/call`` span, and
marks as an error the ``server/discover`` probe that an older server refuses, as expected,
with ``-32601`` at every connection; turnstream's span is the one the conventions describe."""


class _WithoutOwnSpans(trace.TracerProvider):
    """The global tracer provider: ``inner``'s tracers, and none for the ``OWN_SPANS`` scopes."""

    def __init__(self, inner: TracerProvider) -> None:
        self.inner = inner

    def get_tracer(self, instrumenting_module_name: str, instrumenting_library_version: str | None = None,
                   schema_url: str | None = None, attributes: Any = None) -> trace.Tracer:
        if instrumenting_module_name in OWN_SPANS:
            return trace.NoOpTracer()
        return self.inner.get_tracer(instrumenting_module_name, instrumenting_library_version, schema_url,
                                     attributes)


def _choice(variable: str) -> str:
    value = os.environ.get(variable, "").strip().lower() or "otlp"
    if value not in ("otlp", "console", "none"):
        log.warning("%s=%s is not one turnstream exports to (otlp, console, none); using otlp", variable, value)
        return "otlp"
    return value


def _stdout_to_devnull() -> None:
    """Point standard output at /dev/null once its reader has gone.

    `turnstream serve | tee spans.json` stopped with Ctrl-C ends `tee` with the server, and the
    console exporters' last flush at shutdown then meets a closed pipe. From here on the writes, and
    Python's own flush at exit, succeed and go nowhere, as they would after `| head`.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # standard output is not a file here (closed, or replaced)
        pass


class _ConsoleSpans(ConsoleSpanExporter):
    """Spans printed as JSON; a reader that went away ends the printing, without a traceback."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            return super().export(spans)
        except BrokenPipeError:
            _stdout_to_devnull()
            return SpanExportResult.SUCCESS


class _ConsoleMetrics(ConsoleMetricExporter):
    """Metrics printed as JSON, with the same ending as the spans."""

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        try:
            return super().export(metrics_data, timeout_millis, **kwargs)
        except BrokenPipeError:
            _stdout_to_devnull()
            return MetricExportResult.SUCCESS


def from_env() -> Telemetry:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
    if protocol != "http/protobuf":
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: turnstream exports http/protobuf only", protocol)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "turnstream"})
    tracer_provider = TracerProvider(resource=resource)
    traces = _choice("OTEL_TRACES_EXPORTER")
    if traces != "none":
        exporter = OTLPSpanExporter() if traces == "otlp" else _ConsoleSpans()
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    readers: list[MetricReader] = []
    what = _choice("OTEL_METRICS_EXPORTER")
    if what != "none":
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter() if what == "otlp"
                                                     else _ConsoleMetrics()))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    trace.set_tracer_provider(_WithoutOwnSpans(tracer_provider))
    metrics.set_meter_provider(meter_provider)
    log.info("OpenTelemetry on: traces to %s, metrics to %s", traces, what)
    return Telemetry(tracer_provider, meter_provider)


__all__ = ["OWN_SPANS", "from_env"]
