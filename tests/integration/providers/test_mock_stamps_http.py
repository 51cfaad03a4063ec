"""The mock provider's send-time stamps (``{{sent_at}}``) and connection reuse between steps."""

from __future__ import annotations

import time

from tests.support.mock_provider import MockHandle
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Delta, Message, ModelRequest, StepEnded

STAMP = "{{sent_at}}"


async def test_each_fragment_carries_the_time_it_was_sent_and_the_connection_is_reused(
        mock_provider: MockHandle) -> None:
    name = mock_provider.scenario("stamped", {"fragment_size": len(STAMP),
                                     "steps": [{"blocks": [{"type": "text", "text": STAMP * 5}]}]})
    provider = AnthropicProvider(name, api_key="test-key", base_url=mock_provider.base_url)
    try:
        for _ in range(2):
            before = time.time()
            request = ModelRequest(model=name, messages=[Message("user", ["hi"])])
            events = [ev async for ev in provider.stream(request)]
            after = time.time()
            texts = [ev.value for ev in events if isinstance(ev, Delta) and ev.kind == "text"]
            assert len(texts) == 5
            stamps = [float(t) for t in texts]
            assert all(before <= s <= after for s in stamps)
            assert stamps == sorted(stamps)
            assert isinstance(events[-1], StepEnded)
        # The second step went over the first step's connection: the body was read to its end.
        connector = provider._client.session().connector
        assert connector is not None
        idle = [conn for conns in connector._conns.values() for conn in conns]  # aiohttp's kept-alive ones
        assert len(idle) == 1
    finally:
        await provider.aclose()
