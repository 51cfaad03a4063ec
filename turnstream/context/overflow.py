"""Recognising a provider's "the request is too long" refusal, by type and code.

Each API says it its own way (PROVIDER-FACTS.md has the bytes):

* Anthropic: ``400 invalid_request_error``, "prompt is too long: 208310 tokens > 200000
  maximum", or, when the input fits but not with ``max_tokens``, "input length and
  `max_tokens` exceed context limit: 189136 + 20000 > 204648, …". Anthropic sends no code,
  so its type is checked and then the start of its message.
* OpenAI (Chat Completions and Responses, in the body or as a stream's error event):
  ``code: "context_length_exceeded"``, type ``invalid_request_error``.
* OpenAI-compatible servers: llama.cpp's ``exceed_context_size_error`` type; vLLM and
  gateways answer 400 with OpenAI's wording ("maximum context length is … tokens").
"""

from __future__ import annotations

import re

from ..errors import ProviderError

OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"})
ANTHROPIC_PREFIXES = ("prompt is too long", "input length and `max_tokens` exceed context limit")
COMPATIBLE_WORDING = "maximum context length is"


def is_context_overflow(exc: BaseException) -> bool:
    if not isinstance(exc, ProviderError):
        return False
    if exc.api_code in OVERFLOW_CODES or exc.error_type in OVERFLOW_CODES:
        return True
    if exc.status not in (400, 413, 200, None):
        return False
    if exc.error_type == "invalid_request_error" and exc.message.startswith(ANTHROPIC_PREFIXES):
        return True
    return exc.status == 400 and COMPATIBLE_WORDING in exc.message


_STATED = (
    re.compile(r"maximum context length is (\d+) tokens"),  # OpenAI, vLLM, LM Studio, OpenRouter
    re.compile(r"tokens > (\d+) maximum"),  # Anthropic: the prompt alone
    re.compile(r"exceed context limit: \d+ \+ \d+ > (\d+)"),  # Anthropic: the prompt with max_tokens
)


def stated_window(exc: ProviderError) -> int | None:
    """The window a refusal names, when its message names one (a refinement: what makes it a
    refusal is its type and code, ``is_context_overflow``)."""
    for pattern in _STATED:
        m = pattern.search(exc.message)
        if m:
            return int(m.group(1))
    return None
