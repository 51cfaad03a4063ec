"""The mock's context windows: models named with a small window refuse an oversized request
as each API does, so the tests meet the real failure.

A request's model selects the window: a name holding ``mock-<N>k`` (``mock-8k``,
``notebook-mock-32k``) has N x 1,024 tokens, as has a scenario with ``"context_window": N``;
other models have no window here. The size of a request is counted the way a reader of the
providers' tokenizers would guess it: one token per four bytes of the JSON of what the
model reads (system prompt, messages or input, tools), plus a thousand per image or file.
The real tokenizers differ by a few tens of per cent either way; turnstream's estimate is
calibrated from each step's reported usage, which the mock computes the same way
(``request_tokens``), so the two agree as they do with a real provider.

The refusals, byte for byte as the APIs send them (PROVIDER-FACTS.md):

* Anthropic ``400 invalid_request_error``: "prompt is too long: N tokens > M maximum" when
  the input alone passes the window, "input length and `max_tokens` exceed context limit:
  N + K > M, decrease input length or `max_tokens` and try again" when the input with
  ``max_tokens`` does;
* OpenAI Chat Completions ``400``, ``code: context_length_exceeded``, ``param: messages``:
  "This model's maximum context length is M tokens. However, your messages resulted in N
  tokens. Please reduce the length of the messages.";
* OpenAI Responses ``400``, ``code: context_length_exceeded``, ``param: input``: "Your input
  exceeds the context window of this model. Please adjust your input and try again."
"""

from __future__ import annotations

import json
from typing import Any

from ..context.windows import MOCK_WINDOW

BYTES_PER_TOKEN = 4
MEDIA_TOKENS = 1_000
_READ = ("system", "messages", "input", "instructions", "tools")


def window_of(model: str, scenario_doc: dict[str, Any]) -> int | None:
    declared = scenario_doc.get("context_window")
    if isinstance(declared, int) and declared > 0:
        return declared
    m = MOCK_WINDOW.search(model)
    return int(m.group(1)) * 1024 if m else None


def _media(node: Any) -> int:
    if isinstance(node, dict):
        kind = node.get("type")
        here = 1 if kind in ("image", "document", "image_url", "input_image", "input_file", "file") else 0
        return here + sum(_media(v) for k, v in node.items() if k != "data")
    if isinstance(node, list):
        return sum(_media(v) for v in node)
    return 0


def request_tokens(body: dict[str, Any]) -> int:
    """The mock's count of a request's input tokens (see the module docstring)."""
    read = {k: body[k] for k in _READ if k in body}
    media = _media(read)
    text = json.dumps(_without_media_bytes(read), separators=(",", ":"), ensure_ascii=False)
    return -(-len(text.encode()) // BYTES_PER_TOKEN) + media * MEDIA_TOKENS


def _without_media_bytes(node: Any) -> Any:
    """The request with base64 payloads left out (they are counted as ``MEDIA_TOKENS``)."""
    if isinstance(node, dict):
        return {k: ("" if k in ("data", "image_url", "file_data") and isinstance(v, str) and len(v) > 256
                    else _without_media_bytes(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_without_media_bytes(v) for v in node]
    return node


def anthropic_refusal(tokens: int, max_tokens: int, window: int) -> dict[str, Any] | None:
    if tokens > window:
        message = f"prompt is too long: {tokens} tokens > {window} maximum"
    elif tokens + max_tokens > window:
        message = (f"input length and `max_tokens` exceed context limit: {tokens} + {max_tokens} > {window}, "
                   "decrease input length or `max_tokens` and try again")
    else:
        return None
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def chat_refusal(tokens: int, window: int) -> dict[str, Any] | None:
    if tokens <= window:
        return None
    return {"error": {"message": f"This model's maximum context length is {window} tokens. However, your "
                                 f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


def responses_refusal(tokens: int, window: int) -> dict[str, Any] | None:
    if tokens <= window:
        return None
    return {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input "
                                 "and try again.",
                      "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}
