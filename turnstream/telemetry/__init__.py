"""OpenTelemetry GenAI traces and metrics, off and free unless configured (docs/tracing.md).

What is traced follows the OpenTelemetry GenAI semantic conventions (the 1.37+ attribute
names: ``gen_ai.provider.name``, not the older ``gen_ai.system``):

* ``invoke_agent``: each drive of a turn (its start, or its continuation after the client
  answered), parent of the rest;
* ``chat {model}``: each provider call (a step, with its retries), with usage (cache reads
  and writes too), finish reasons and the time to the first chunk;
* ``execute_tool {name}``: each server tool call, with ``error.type`` when it failed;
* the metrics ``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage`` and
  ``gen_ai.client.operation.time_to_first_chunk``;
* a server span per HTTP request, continuing the caller's ``traceparent``.

Message contents are recorded only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

On or off is decided once, from the standard variables (``telemetry_from_env``): with none
of them set, nothing of OpenTelemetry is imported and the runner does no per-event work.
``Telemetry`` (``turnstream.telemetry.otel``) may also be made directly, on the global
providers or on given ones, and passed to ``Agent(telemetry=…)``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .otel import Telemetry

log = logging.getLogger("turnstream.telemetry")

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                      "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
EXPORTER_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER")

_from_env: list[Telemetry | None] = []


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for telemetry: an OTLP endpoint, or a traces or metrics
    exporter other than ``none``; never with ``OTEL_SDK_DISABLED=true``."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if any(env.get(v, "").strip() for v in ENDPOINT_VARIABLES):
        return True
    return any(env.get(v, "").strip().lower() not in ("", "none") for v in EXPORTER_VARIABLES)


def telemetry_from_env() -> Telemetry | None:
    """The process's telemetry, set up from the ``OTEL_*`` variables on first use; None (and
    nothing imported) when they do not ask for it, or when the ``otel`` extra is missing."""
    if not _from_env:
        tel = None
        if configured():
            try:
                from .setup import from_env
            except ImportError:
                log.warning("OTEL_* variables are set but OpenTelemetry is not installed: "
                            "pip install 'turnstream[otel]'; tracing stays off")
            else:
                tel = from_env()
        _from_env.append(tel)
    return _from_env[0]


__all__ = ["configured", "telemetry_from_env"]
