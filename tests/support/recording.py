"""The scripted provider, keeping every request it was sent (for unit tests of the loop and its phases)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from turnstream.providers.base import ModelRequest, ProviderEvent
from turnstream.providers.scripted import ScriptedProvider
from turnstream.scenarios.engine import Scenario


class Recording(ScriptedProvider):
    """Plays the scenario ``spec``; ``requests`` holds what each step was asked."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(Scenario({"name": "unit", **spec}))
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        self.requests.append(request)
        async for ev in super().stream(request):
            yield ev
