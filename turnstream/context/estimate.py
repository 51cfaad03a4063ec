"""How many tokens a request would hold, without a tokenizer.

No tokenizer is downloaded (nothing can be fetched on many users' machines, and each model
family has its own). Instead the provider measures for us: every step's usage reports the
input tokens of the request it was sent, and the request's size in characters is known here,
so their ratio (characters per token) is the exact rate for *this* conversation's mix of
prose, code and JSON. The next request is mostly the same request with a little more at the
end, so ``chars / rate`` is the previous step's exact count plus an estimate of only what is
new. Before the first usage of a turn arrives the rate is ``CONSERVATIVE_CHARS_PER_TOKEN``,
lower than any text measured (English prose runs about 4, code and JSON about 3), so a first
estimate errs on the side of clearing early.

Counting characters walks the request once; the text of blocks is already in memory, so it
costs a few microseconds per message (``make bench``: assembler_bench's estimate line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from ..blocks import (
    ProviderBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserBlock,
)
from ..providers.base import Message, ModelRequest

CONSERVATIVE_CHARS_PER_TOKEN = 2.5
"""The rate assumed before a step has measured one."""
MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN = 1.5, 6.0
"""A measured rate is kept within these (a usage of a tiny request says little)."""
MESSAGE_OVERHEAD = 8
"""Characters counted per message and per block for the wire's framing (roles, ids, keys)."""
ATTACHMENT_TOKENS = 1_600
"""Tokens counted per image or file: Anthropic's figure for an image at its largest size
(about 1.15 megapixels / 750); a PDF page costs more, but a document is sent at most once."""


def block_chars(block: object) -> int:
    """Characters a block puts into a request."""
    if isinstance(block, str):
        return len(block) + MESSAGE_OVERHEAD
    if isinstance(block, TextBlock):
        return len(block.text) + MESSAGE_OVERHEAD
    if isinstance(block, ToolResultBlock):
        return len(block.content) + len(block.tool_use_id) + MESSAGE_OVERHEAD
    if isinstance(block, ToolUseBlock):
        args = block.raw_input if block.raw_input is not None else orjson.dumps(block.input).decode()
        return len(args) + len(block.name) + len(block.tool_use_id) + MESSAGE_OVERHEAD
    if isinstance(block, UserBlock):
        return len(block.text) + MESSAGE_OVERHEAD
    if isinstance(block, ThinkingBlock):
        return len(block.thinking) + len(block.signature or "") + MESSAGE_OVERHEAD
    if isinstance(block, RedactedThinkingBlock):
        return len(block.data) + MESSAGE_OVERHEAD
    if isinstance(block, ProviderBlock):
        return len(orjson.dumps(block.data)) + MESSAGE_OVERHEAD
    return MESSAGE_OVERHEAD


def attachments_of(block: object) -> int:
    if isinstance(block, ToolResultBlock | UserBlock):
        return len(block.attachments)
    return 0


def messages_chars(messages: Sequence[Message]) -> tuple[int, int]:
    """Characters and attachments the messages hold."""
    chars = attachments = 0
    for m in messages:
        chars += MESSAGE_OVERHEAD
        for b in m.blocks:
            chars += block_chars(b)
            attachments += attachments_of(b)
    return chars, attachments


def request_chars(req: ModelRequest) -> tuple[int, int]:
    """Characters and attachments of a whole request: system prompt, tools and messages."""
    chars, attachments = messages_chars(req.messages)
    chars += len(req.system or "")
    for t in req.tools:
        chars += len(t.name) + len(t.description) + len(orjson.dumps(t.input_schema)) + MESSAGE_OVERHEAD
    return chars, attachments


@dataclass(slots=True)
class TokenEstimator:
    """Characters per token, measured on this conversation's own requests."""

    chars_per_token: float = CONSERVATIVE_CHARS_PER_TOKEN
    measured: bool = False

    def tokens(self, chars: int, attachments: int = 0) -> int:
        """The estimated input tokens of a request of this size."""
        return int(chars / self.chars_per_token) + 1 + attachments * ATTACHMENT_TOKENS

    def calibrate(self, chars: int, attachments: int, input_tokens: int) -> None:
        """A step's request (``chars``, ``attachments``) was counted ``input_tokens`` by its
        provider (cached ones included): take its rate for the next estimate. A usage that
        says nothing (0, unknown, or all attachments) keeps the rate there was."""
        text_tokens = input_tokens - attachments * ATTACHMENT_TOKENS
        if chars <= 0 or text_tokens <= 0:
            return
        self.chars_per_token = min(MAX_CHARS_PER_TOKEN, max(MIN_CHARS_PER_TOKEN, chars / text_tokens))
        self.measured = True
