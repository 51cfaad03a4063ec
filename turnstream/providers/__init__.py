"""Model adapters, one per wire format, chosen by a ``provider:model`` string."""

from __future__ import annotations

from ..errors import UsageError
from .base import ModelRequest, Provider, ProviderEvent

PREFIXES = ("anthropic", "openai", "openai-responses", "scripted")


def resolve_model(name: str) -> Provider:
    """``anthropic:<model>``, ``openai:<model>``, ``openai-responses:<model>`` or ``scripted:<scenario>``."""
    prefix, sep, model = name.partition(":")
    if not sep or not model:
        raise UsageError(f"model {name!r} must look like provider:model, with provider one of {', '.join(PREFIXES)}")
    if prefix == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(model)
    if prefix == "openai":
        from .openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(model)
    if prefix == "openai-responses":
        from .openai_responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(model)
    if prefix == "scripted":
        from .scripted import ScriptedProvider

        try:
            return ScriptedProvider(model)
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from None
    raise UsageError(f"unknown provider {prefix!r} in {name!r}; use one of {', '.join(PREFIXES)}")


__all__ = ["ModelRequest", "Provider", "ProviderEvent", "resolve_model"]
