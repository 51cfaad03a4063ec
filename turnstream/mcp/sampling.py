"""An MCP server's ``sampling/createMessage``: the server asks the client's model for a
message while one of its tools runs. turnstream declares the ``sampling`` capability and
answers with the turn's own model (``turnstream/sampling.py``: a separate model call,
metered as a sub-step of the turn), as ``TURNSTREAM_MCP_SAMPLING`` says:

- ``ask`` (the default): the user approves each request first. The question is asked the way
  a server's own question is (an elicitation with no fields: accept or decline), so the turn
  pauses ``awaiting_client`` and every client that answers questions answers this one.
- ``allow``: the model is asked without asking the user.
- ``deny``: the server gets an MCP error.

Text is what is passed: a request whose messages hold images, audio or tool calls, or that
offers the model tools, is answered with an error. The server's ``max_tokens`` is honoured up
to the turn's own; its model preferences, temperature and stop sequences are not (the
turn's model answers as it is configured).
"""

from __future__ import annotations

from typing import Literal

import mcp_types as mt

from ..errors import InvalidValue
from ..tools.sampler import Sampled, SampleTurn

SamplingMode = Literal["ask", "allow", "deny"]
DECLINED = -1
"""The error code MCP's specification gives for a sampling request the user rejected."""
PREVIEW_CHARS = 400

_STOP = {"end_turn": "endTurn", "max_tokens": "maxTokens", "stop_sequence": "stopSequence"}


def turns_of(params: mt.CreateMessageRequestParams) -> list[SampleTurn]:
    """The request's messages as plain text turns, or ``InvalidValue`` (what turnstream does not
    pass to its model; the message is the server's error)."""
    if params.tools:
        raise InvalidValue("request", "turnstream does not offer its model tools in a sampling request")
    turns: list[SampleTurn] = []
    for i, message in enumerate(params.messages):
        blocks = message.content if isinstance(message.content, list) else [message.content]
        texts: list[str] = []
        for block in blocks:
            if not isinstance(block, mt.TextContent):
                raise InvalidValue("request", f"messages[{i}] holds {block.type} content; turnstream samples text only")
            texts.append(block.text)
        turns.append(SampleTurn(message.role, "\n\n".join(texts)))
    if not turns:
        raise InvalidValue("request", "the request has no messages")
    return turns


def question(server: str, params: mt.CreateMessageRequestParams, turns: list[SampleTurn]) -> mt.ElicitRequestFormParams:
    """What the user is asked under ``ask``: the server, what it sends the model, accept or decline."""
    said = turns[-1].text
    if len(said) > PREVIEW_CHARS:
        said = said[:PREVIEW_CHARS] + "…"
    system = f" (with a system prompt of {len(params.system_prompt)} characters)" if params.system_prompt else ""
    message = (f"The MCP server {server!r} asks to use the model (sampling, up to {params.max_tokens:,} tokens)"
               f"{system}: {said!r}. Accept to let it, decline to refuse.")
    return mt.ElicitRequestFormParams(message=message, requested_schema={"type": "object", "properties": {}})


def result_of(sampled: Sampled) -> mt.CreateMessageResult:
    return mt.CreateMessageResult(role="assistant", content=mt.TextContent(type="text", text=sampled.text),
                                  model=sampled.model, stop_reason=_STOP.get(sampled.stop_reason, sampled.stop_reason))


def refusal(message: str, code: int = DECLINED) -> mt.ErrorData:
    return mt.ErrorData(code=code, message=message)


__all__ = ["DECLINED", "SamplingMode", "question", "refusal", "result_of", "turns_of"]
