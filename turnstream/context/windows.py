"""How many tokens each model's context window holds, beside the price table (``pricing.py``).

A request's input and its ``max_tokens`` share the window: Anthropic refuses a request whose
input plus ``max_tokens`` passes it, and OpenAI's reasoning models keep room for their output
out of the same total. So the figure here is the *whole* window, and the budget for what is
sent is the window less the step's ``max_tokens`` (``input_budget``).

A model id with a date or version suffix (``claude-sonnet-4-5-20250929``) takes the entry of
its longest listed prefix, as prices do. Unknown models (a local server, a gateway alias) take
``DEFAULT_CONTEXT_TOKENS``, or ``TURNSTREAM_CONTEXT_TOKENS`` when set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

ANTHROPIC_SOURCE = "https://platform.claude.com/docs/en/about-claude/models/overview (read 2026-11-29)"
OPENAI_SOURCE = "https://developers.openai.com/api/docs/models (read 2026-11-29)"

DEFAULT_CONTEXT_TOKENS = 128_000
"""The window assumed for a model nobody listed (a gateway's alias, a local server): the most
common window of current hosted models, so a capable server is not sent needlessly cleared
requests. A smaller server (llama.cpp and Ollama builds often run 4k-32k) refuses a request
past its window; turnstream then takes the window the refusal states, when it states one
(vLLM, LM Studio, OpenRouter and OpenAI say "maximum context length is N tokens"), for this
model from then on in this process (``SEEN``). ``TURNSTREAM_CONTEXT_TOKENS`` sets it outright."""

SEEN: dict[str, int] = {}
"""Windows stated by a provider's refusal, by ``provider:model``: they win over the table."""

CONTEXT_WINDOWS: dict[str, tuple[int, str]] = {
    # Anthropic: 200k for every current model (1M for Sonnet only behind a beta header,
    # which turnstream does not send).
    "anthropic:claude-opus-4-5": (200_000, ANTHROPIC_SOURCE),
    "anthropic:claude-opus-4-1": (200_000, ANTHROPIC_SOURCE),
    "anthropic:claude-sonnet-4-5": (200_000, ANTHROPIC_SOURCE),
    "anthropic:claude-sonnet-4": (200_000, ANTHROPIC_SOURCE),
    "anthropic:claude-haiku-4-5": (200_000, ANTHROPIC_SOURCE),
    "anthropic:claude-3-5-haiku": (200_000, ANTHROPIC_SOURCE),
    # OpenAI: gpt-5's 400k is 272k of input plus 128k of output.
    "openai:gpt-5": (400_000, OPENAI_SOURCE),
    "openai:gpt-5-mini": (400_000, OPENAI_SOURCE),
    "openai:gpt-4.1": (1_047_576, OPENAI_SOURCE),
    "openai:gpt-4.1-mini": (1_047_576, OPENAI_SOURCE),
    "openai:gpt-4o": (128_000, OPENAI_SOURCE),
    "openai:gpt-4o-mini": (128_000, OPENAI_SOURCE),
}
"""``provider:model`` -> (tokens, where the number comes from)."""

MOCK_WINDOW = re.compile(r"(?:^|[-_:/])mock-(\d{1,4})k(?:$|[-_])")
"""A model name holding ``mock-<N>k`` (``mock-8k``, ``notebook-mock-32k``) has N x 1,024
tokens, under any provider: the mock provider serves every wire format with that window."""

_FAMILY = {"openai-responses": "openai", "openai-compatible": "openai"}


def context_window(origin: str, default: int = DEFAULT_CONTEXT_TOKENS,
                   table: Mapping[str, tuple[int, str]] = CONTEXT_WINDOWS) -> int:
    """The window of ``provider:model``: the one a refusal stated (``SEEN``), a mock model's
    from its name (``MOCK_WINDOW``), the table's by exact name or longest listed prefix, else
    ``default``."""
    if origin in SEEN:
        return SEEN[origin]
    provider, _, model = origin.partition(":")
    mock = MOCK_WINDOW.search(model)
    if mock:
        return int(mock.group(1)) * 1024
    key = f"{_FAMILY.get(provider, provider)}:{model}"
    if key in table:
        return table[key][0]
    best = max((k for k in table if key.startswith(k + "-")), key=len, default=None)
    return table[best][0] if best is not None else default


def input_budget(window: int, max_tokens: int, fraction: float) -> int:
    """Tokens a request's input may hold before it is made smaller: ``fraction`` of what the
    window leaves once the step's output (``max_tokens``) has its room, never below a tenth
    of the window (a ``max_tokens`` as big as the window still lets a short request through)."""
    room = max(window - max_tokens, window // 10)
    return int(room * fraction)
