"""Traces and metrics leave a real ``turnstream serve`` over OTLP/HTTP, configured by the
standard variables only, and reach a receiver the test runs; the spans continue the trace
of the request's ``traceparent``. With those variables unset, OpenTelemetry is not even
imported."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.support.otlp import Receiver, attrs
from tests.support.paths import REPO
from tests.support.server import SCENARIOS, new_session, scenario, server_errors, sse, start_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def test_spans_and_metrics_reach_an_otlp_receiver_in_the_callers_trace(receiver: Receiver, tmp_path: Path) -> None:
    model = scenario(tmp_path / "chain.json", SCENARIOS["chain"])
    srv = start_server(tmp_path, model=model, env={
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "turnstream-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200"})
    try:
        with srv.client() as c:
            sid = new_session(c)
            with sse(c, "POST", f"/api/sessions/{sid}/turns", json={"message": "add them"},
                     headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}) as stream:
                assert stream.rest()[-1].data["status"] == "complete"
        spans: dict[str, Any] = {}
        metric_names: set[str] = set()
        service = None
        deadline = time.monotonic() + 30
        wanted = {"invoke_agent", "execute_tool calculator", "POST /api/sessions/{session_id}/turns"}
        while not (wanted <= set(spans) and "gen_ai.client.operation.duration" in metric_names):
            path, body = receiver.got.get(timeout=max(0.1, deadline - time.monotonic()))
            if path == "/v1/traces":
                req = ExportTraceServiceRequest.FromString(body)
                for rs in req.resource_spans:
                    service = attrs(rs.resource.attributes)["service.name"]
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            spans.setdefault(s.name, []).append(s)
            elif path == "/v1/metrics":
                req_m = ExportMetricsServiceRequest.FromString(body)
                metric_names |= {m.name for rm in req_m.resource_metrics for sm in rm.scope_metrics
                                 for m in sm.metrics}
            else:
                raise AssertionError(f"unexpected OTLP path {path}")
    finally:
        srv.stop()
    assert server_errors(srv) == []
    assert service == "turnstream-test"
    [request] = spans["POST /api/sessions/{session_id}/turns"]
    [agent] = spans["invoke_agent"]
    chats = [s for name, ss in spans.items() if name.startswith("chat ") for s in ss]
    tools = spans["execute_tool calculator"]
    assert len(chats) == 3 and len(tools) == 2
    for s in (request, agent, *chats, *tools):
        assert s.trace_id.hex() == TRACE_ID  # the caller's trace, continued
    assert request.parent_span_id.hex() == PARENT_ID
    assert attrs(request.attributes)["http.response.status_code"] == 200
    assert agent.parent_span_id == request.span_id
    assert all(s.parent_span_id == agent.span_id for s in (*chats, *tools))
    assert [attrs(t.attributes)["gen_ai.tool.name"] for t in tools] == ["calculator", "calculator"]
    assert attrs(chats[0].attributes)["gen_ai.operation.name"] == "chat"
    assert "gen_ai.client.token.usage" in metric_names


def test_off_imports_nothing_of_opentelemetry(tmp_path: Path) -> None:
    """A turn with a tool, and the server's app module, with no OTEL_* variable set."""
    code = """
import asyncio, sys
from turnstream import Agent, tool
from turnstream.telemetry import telemetry_from_env
import turnstream.server.app

@tool
def double(x: int) -> int:
    '''Double x.'''
    return 2 * x

async def main() -> None:
    turn = await Agent("scripted:" + sys.argv[1], tools=[double]).run("double 21")
    assert turn.status == "complete", turn
    assert telemetry_from_env() is None

asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
print("loaded:", loaded)
"""
    doc = {"name": "double", "steps": [{"blocks": [{"type": "tool_use", "name": "double", "input": {"x": 21}}]},
                                       {"blocks": [{"type": "text", "text": "{{last}}"}]}]}
    path = scenario(tmp_path / "double.json", doc).split(":", 1)[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=60,
                         env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "loaded: []"
    # and the same program with an endpoint set does load the SDK (the check above can fail)
    on = subprocess.run([sys.executable, "-c", code.replace("is None", "is not None"), path], capture_output=True,
                        text=True, timeout=60, env={**env, "OTEL_TRACES_EXPORTER": "none",
                                                     "OTEL_METRICS_EXPORTER": "console",
                                                     "OTEL_METRIC_EXPORT_INTERVAL": "60000"}, cwd=REPO)
    assert on.returncode == 0, on.stderr
    assert "opentelemetry.sdk.trace" in on.stdout


def test_console_exporters_end_quietly_when_their_reader_has_gone() -> None:
    """`turnstream serve | tee spans.json` stopped with Ctrl-C: `tee` is gone before the exporters'
    last flush. That flush (a span and the metrics, at exit) goes nowhere, without a traceback."""
    code = """
import sys
from opentelemetry import trace
from turnstream.telemetry import telemetry_from_env
tel = telemetry_from_env()
assert tel is not None
sys.stdin.readline()  # the reader of standard output has gone by now
with trace.get_tracer("check").start_as_current_span("after the reader left"):
    tel.duration.record(0.5, {"gen_ai.operation.name": "chat"})
"""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
           "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console",
           "OTEL_METRIC_EXPORT_INTERVAL": "600000"}

    def run(read_it: bool) -> tuple[str, str]:
        reader, writer = os.pipe()  # standard output, whose reader the test may close
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=writer,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        os.close(writer)
        if not read_it:
            os.close(reader)
        _, err = proc.communicate("go\n", timeout=60)  # the output is a few kB, within a pipe's buffer
        assert proc.returncode == 0, err
        if not read_it:
            return "", err
        with os.fdopen(reader) as out:
            return out.read(), err

    out, err = run(read_it=True)  # with a reader, the span and the metric are printed there
    assert '"name": "after the reader left"' in out and "gen_ai.client.operation.duration" in out, out
    assert err == ""
    out, err = run(read_it=False)
    assert err == ""  # no traceback, no "Exception ignored" at exit
