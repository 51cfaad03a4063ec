"""The public API is deliberate: a name added to or dropped from ``turnstream`` fails here."""

from __future__ import annotations

import turnstream

EXPECTED = {
    "Agent", "Block", "BlockDelta", "BlockStart", "BlockStop", "ErrorEvent", "Limits", "ProviderBlock",
    "ProviderError", "RedactedThinkingBlock", "RunError", "Session", "StepRestart", "StepStart", "StreamEvent",
    "TextBlock", "ThinkingBlock", "Tool", "ToolContext", "ToolRequest", "ToolResultBlock", "ToolUseBlock", "Turn",
    "TurnComplete", "TurnStart", "TurnstreamError", "Usage", "UsageError", "tool",
}


def test_exported_names_are_pinned() -> None:
    assert set(turnstream.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(turnstream, name) is not None


def test_event_names_match_the_spec() -> None:
    from turnstream.events import EVENT_TYPES

    assert set(EVENT_TYPES) == {"turn_start", "step_start", "block_start", "block_delta", "block_stop",
                                "tool_request", "step_restart", "turn_complete", "error"}
