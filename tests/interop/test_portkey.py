"""turnstream through Portkey's AI gateway (1.15.2, Node.js) in front of ``turnstream
mock-provider``: every client format the gateway takes (Anthropic Messages, Chat Completions,
Responses) to every backend it can take that format to, × multi-step tool loops with parallel
calls, large fragmented arguments, thinking and faults.

The gateway keeps no configuration: each request names its backend in two headers,
``x-portkey-provider`` (``openai`` or ``anthropic``) and ``x-portkey-custom-host`` (the mock's
``/v1``): the providers' ``headers=`` (``ANTHROPIC_CUSTOM_HEADERS`` / ``OPENAI_CUSTOM_HEADERS``
for the server and the terminal chat).

Its routes: Chat Completions → ``openai`` (passed through) or ``anthropic`` (translated to
Messages); Messages → ``anthropic`` only; Responses → ``openai`` only. The two others answer 500
with the gateway's own message. Where the gateway mistranslates, the case is in ``KNOWN`` with the
exact symptom it shows: the test checks that symptom and then reports an expected failure, so a
gateway (or turnstream) that no longer shows it fails the test.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from tests.interop import servers
from tests.interop.scenarios import (
    ONE_CALL_SCENARIOS,
    PARALLEL,
    SCENARIOS,
    Tools,
    check_turn,
    run_turn,
    summary,
)
from tests.support.ui_stream import open_gate, release
from turnstream.blocks import Turn
from turnstream.events import BlockDelta, StepRestart, StreamEvent
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Provider
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider

ROUTES = [("anthropic", "anthropic"), ("openai", "openai"), ("openai", "anthropic"), ("openai-responses", "openai")]
"""(client format, backend) pairs the gateway serves."""
UNSUPPORTED = {("anthropic", "openai"): "messages is not supported by openai",
               ("openai-responses", "anthropic"): "createModelResponse is not supported by anthropic"}

SPLIT = "`tool_use` ids were found without `tool_result` blocks immediately after"
KNOWN: dict[tuple[str, str, str], tuple[str, str]] = {
    **{("openai", "anthropic", s): (
        "split", "Portkey 1.15.2 turns each Chat `tool` message into a user message of its own, so two parallel "
                 "calls' results reach Anthropic as two consecutive user messages and the second call has no "
                 "result in the message after it: rejected with 400 (Portkey-AI/gateway#980; the request it "
                 "sends is tests/fixtures/interop/portkey-chat-to-messages-split-tool-results.json)")
       for s in ("parallel", "fault-status-529", "fault-error-midstream", "fault-drop")},
}


def client(api: str, backend: str, model: str, gateway: str, mock: str) -> Provider:
    headers = {"x-portkey-provider": backend, "x-portkey-custom-host": mock + "/v1"}
    if api == "anthropic":
        return AnthropicProvider(model, api_key="mock-key", base_url=gateway, headers=headers)
    if api == "openai":
        return OpenAIChatProvider(model, api_key="mock-key", base_url=gateway + "/v1", headers=headers)
    return OpenAIResponsesProvider(model, api_key="mock-key", base_url=gateway + "/v1", headers=headers)


def cases() -> list[Any]:
    out = []
    for api, backend in ROUTES:
        names = list(SCENARIOS) + (list(ONE_CALL_SCENARIOS) if (api, backend) == ("openai", "anthropic") else [])
        out += [pytest.param(api, backend, s, id=f"{api}-{backend}-{s}") for s in names]
    return out


def show_known(kind: str, turn: Turn, tools: Tools) -> None:
    """The symptom ``kind`` as the gateway shows it, exactly."""
    assert kind == "split"
    assert turn.status == "failed" and SPLIT in (turn.error or ""), (turn.status, turn.error)


@pytest.mark.parametrize(("api", "backend", "scenario"), cases())
async def test_tool_loop(api: str, backend: str, scenario: str, portkey_url: str, mock_url: str,
                         results: dict[str, Any]) -> None:
    name = f"portkey-{scenario}-{api}-{backend}"
    spec = SCENARIOS.get(scenario) or ONE_CALL_SCENARIOS[scenario]
    httpx.post(mock_url + "/_mock/scenarios", json={name: spec}).raise_for_status()
    tools = Tools()
    p = client(api, backend, name, portkey_url, mock_url)
    try:
        turn, events = await run_turn(p, tools, thinking=scenario == "thinking")
    finally:
        await p.aclose()
    known = KNOWN.get((api, backend, scenario))
    if known:
        show_known(known[0], turn, tools)
        pytest.xfail(known[1])
    check_turn(scenario, turn, events, tools)
    results[f"portkey {api} -> {backend} {scenario}"] = summary(turn, events)


async def test_a_responses_stream_cut_after_its_first_text_is_retried(portkey_url: str, mock_url: str,
                                                                      tmp_path: Path) -> None:
    # the other side of an upstream drop before any event (an empty 200, retried): once the gateway
    # has passed events on, its clean end of a cut stream (no response.completed) restarts the step.
    # Whether the gateway passes on what came just before a cut is a race inside it, so the step
    # waits at a gate after its first text delta (frame 4, ending at byte 1,898) until this test has
    # seen that text, and only then is cut (at byte 2,000, inside frame 5). The retry waits at the
    # same gate: the StepRestart opens it again.
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    steps = [dict(s) for s in PARALLEL]
    steps[0] = {**steps[0], "fault": {"kind": "drop", "after_bytes": 2000},
                "gate": {"after_events": 5, "fifo": str(gate)}}
    name = "portkey-late-drop"
    httpx.post(mock_url + "/_mock/scenarios", json={name: {"fragment_size": 5, "steps": steps}}).raise_for_status()
    tools = Tools()
    opened: list[asyncio.Task[None]] = []

    def watch(ev: StreamEvent) -> None:
        if (isinstance(ev, BlockDelta) and ev.text and not opened) or isinstance(ev, StepRestart):
            # in a task: the stream must go on while the opener waits for the retry to reach the gate
            opened.append(asyncio.create_task(asyncio.to_thread(open_gate, gate)))

    p = client("openai-responses", "openai", name, portkey_url, mock_url)
    try:
        turn, events = await run_turn(p, tools, watch=watch)
        await asyncio.gather(*opened)
    finally:
        release(gate)
        await p.aclose()
    check_turn("parallel", turn, events, tools)
    assert len(opened) == 2, "the text came before the cut, and the step restarted once"
    assert summary(turn, events)["restarts"] == 1


@pytest.mark.parametrize(("api", "backend"), list(UNSUPPORTED))
async def test_a_route_it_lacks_fails_with_its_message(api: str, backend: str, portkey_url: str,
                                                       mock_url: str) -> None:
    name = f"portkey-unsupported-{api}-{backend}"
    httpx.post(mock_url + "/_mock/scenarios", json={name: SCENARIOS["parallel"]}).raise_for_status()
    tools = Tools()
    p = client(api, backend, name, portkey_url, mock_url)
    try:
        turn, _ = await run_turn(p, tools)
    finally:
        await p.aclose()
    assert turn.status == "failed" and tools.calls == []
    assert json.loads(turn.error or "") == {"status": "failure", "message": UNSUPPORTED[(api, backend)]}


def test_the_gateway_is_the_pinned_version(portkey_url: str) -> None:
    r = httpx.get(portkey_url + "/")
    assert (r.status_code, r.text) == (200, "AI Gateway says hey!")
    modules = servers.HOME / "portkey" / "node_modules"
    versions = {name: json.loads((modules / name / "package.json").read_text())["version"]
                for name in ("@portkey-ai/gateway", "@hono/node-server")}
    # @hono/node-server after 1.14.1 hands the gateway the upstream's immutable headers, and every
    # streamed answer fails with "TypeError: immutable" (Portkey-AI/gateway#1389): the lock pins it
    assert versions == {"@portkey-ai/gateway": "1.15.2", "@hono/node-server": "1.14.1"}
