"""The public API is deliberate: a name added to or dropped from ``turnstream`` fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import turnstream
import turnstream.errors

ERRORS = {
    "AlreadyExists", "ApiError", "CalculatorError", "EditConflict", "FileTooLarge", "InputNeeded", "InvalidValue",
    "KernelError", "KernelProtocolError", "MCPServerError", "MCPToolError",
    "MissingExtraError",
    "NotATextFileError", "NotFound", "OutputTooLarge", "Overloaded", "PathOutsideRootError", "ProviderError",
    "ProviderProtocolError", "ProviderStatusError", "ProviderStreamError", "Refused", "RemoteError",
    "RemoteStreamBroken", "RunError", "SandboxUnavailable", "SeqConflictError", "ServerError", "ShuttingDown",
    "SimulatedFault", "StaleNotebook", "StoreError", "StoreWriteError", "StreamBrokenError", "ToolError",
    "ToolInputError",
    "TurnCancelled", "TurnConflictError", "TurnNotWaiting", "TurnTakenOver", "TurnstreamError", "UnknownCellError",
    "UsageError", "UserExists", "ContentRejected", "ContextTooLong",
}
EXPECTED = {
    "Agent", "Block", "BlockDelta", "BlockStart", "BlockStop", "ErrorEvent", "Limits", "ProviderBlock",
    "RedactedThinkingBlock", "Session", "StepRestart", "StepStart", "StreamEvent",
    "TextBlock", "ThinkingBlock", "Tool", "ToolApproval", "ToolContext", "ToolRequest", "ToolResultBlock",
    "ToolUseBlock", "Turn", "TurnComplete", "TurnStart", "Usage", "tool",
    "Attachment", "FilePart", "ImagePart", "UserBlock", "part_from_path",
} | ERRORS


def test_exported_names_are_pinned() -> None:
    assert set(turnstream.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(turnstream, name) is not None


def test_event_names_match_the_spec() -> None:
    from turnstream.events import EVENT_TYPES

    assert set(EVENT_TYPES) == {"turn_start", "step_start", "block_start", "block_delta", "block_stop",
                                "tool_request", "tool_approval", "tool_progress", "step_restart", "usage",
                                "context_managed", "budget_warning", "turn_complete", "error", "reconnect"}


def _modules() -> list[str]:
    names = ["turnstream"]
    for info in pkgutil.walk_packages(turnstream.__path__, "turnstream."):
        if info.name.endswith(".child"):  # the kernel's child script runs alone, outside the package
            continue
        names.append(info.name)
    return names


def test_every_exception_is_in_the_one_tree() -> None:
    """Every exception class the package defines lives in ``turnstream.errors``, under
    ``TurnstreamError``, and is exported (the tree's leaves included)."""
    defined = {}
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed
            continue
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("turnstream"):
                defined[obj.__qualname__] = obj
    assert {cls.__module__ for cls in defined.values()} == {"turnstream.errors"}
    assert all(issubclass(cls, turnstream.errors.TurnstreamError) for cls in defined.values())
    assert set(defined) == ERRORS == set(turnstream.errors.__all__)
