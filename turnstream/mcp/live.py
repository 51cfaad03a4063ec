"""Questions a server asks in the middle of a call (``elicitation/create``), on connections
of protocol versions before 2026-07-28, held open while the turn waits for the user.

Such a server sends its question as a request of its own while the ``tools/call`` is open,
and goes on only when it has the answer, so the call cannot be sent again later the way a
2026-07-28 ``InputRequiredResult`` can. Instead the call runs in a task of its own
(``LiveCalls.start``). When its question arrives, the caller (the tool's run in the
executor) ends with ``InputNeeded``: the turn pauses ``awaiting_client`` exactly as it does
for the newer protocol, while the task and the question stay open in this process. The
answer, coming back through the tool-results route as ``ToolContext.answer``, is handed to
the waiting question (``LiveCalls.answer``) and the call is followed again to its result or
its next question. A call not answered within ``HOLD_LIMIT`` seconds, or gone with the
process that held it (a restart), cannot be continued: ``answer`` returns None and the
toolset says so in the call's result.

A server's request for the model (``sampling/createMessage``, ``sampling.py``) arrives the
same way, and goes to the running call the same way: under ``ask`` it is first a question of
its own (accept or decline), and then, or at once under ``allow``, the model the call's turn
speaks with answers it (the ``ToolContext.sampler`` of the run that holds the call now: the
one that handed in the user's answer, after a pause).

The SDK does not say which call a question came from, so a question is given to the one
call of the connection that is running without an open question; with several running it
cannot be placed, and is declined (logged).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import mcp_types as mt
from mcp.client.session import ClientRequestContext

from ..errors import InputNeeded, InvalidValue, ProviderError
from ..tools.tool import ToolContext
from .sampling import SamplingMode, question, refusal, result_of, turns_of

log = logging.getLogger("turnstream.mcp")

HOLD_LIMIT = 3600.0
"""Seconds a question asked mid-call is held open for its answer; then it is answered
``cancel`` and the call is cancelled."""

CallResult = mt.CallToolResult | mt.InputRequiredResult


@dataclass(eq=False)
class LiveCall:
    """One ``tools/call`` running in its own task, and the question it has open, if any."""

    key: str
    task: asyncio.Task[CallResult]
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    question: mt.ElicitRequestFormParams | None = None
    reply: asyncio.Future[mt.ElicitResult] | None = None
    """Set while the server waits for the answer to ``question``."""
    expiry: asyncio.TimerHandle | None = None
    ctx: ToolContext | None = None
    """The context of the run that holds the call now (its turn's model answers sampling)."""


class LiveCalls:
    """The calls of one toolset that may ask mid-call, by key (the key is the ``live`` of
    the question's ``state``)."""

    def __init__(self, server: str, sampling: SamplingMode = "ask") -> None:
        self.server = server
        self.sampling: SamplingMode = sampling
        self._calls: dict[str, LiveCall] = {}

    def start(self, send: Coroutine[Any, Any, CallResult], ctx: ToolContext | None = None) -> LiveCall:
        call = LiveCall(uuid.uuid4().hex, asyncio.create_task(send, name=f"mcp:{self.server}:call"), ctx=ctx)
        call.task.add_done_callback(_settled)
        self._calls[call.key] = call
        return call

    async def follow(self, call: LiveCall, protocol: str) -> CallResult:
        """The call's result, or ``InputNeeded`` for its next question (the call stays open).
        Leaving the ``await`` (a timeout, a cancelled turn) cancels the call."""
        asked = asyncio.ensure_future(call.asked.wait())
        try:
            await asyncio.wait({call.task, asked}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self._end(call)
            raise
        finally:
            asked.cancel()
        if call.task.done():
            self._end(call)
            return call.task.result()
        call.asked.clear()
        question = call.question
        assert question is not None
        call.expiry = asyncio.get_running_loop().call_later(HOLD_LIMIT, self._end, call)
        state = {"server": self.server, "live": call.key, "protocol": protocol}
        raise InputNeeded(question.message, dict(question.requested_schema), state)

    def answer(self, key: Any, reply: mt.ElicitResult, ctx: ToolContext | None = None) -> LiveCall | None:
        """Hand ``reply`` to the question of the call ``key`` (``ctx``: the run that follows
        it from now on); None when that call is not held here (a restart, or it waited longer
        than ``HOLD_LIMIT``)."""
        call = self._calls.get(key) if isinstance(key, str) else None
        if call is None or call.reply is None:
            return None
        if ctx is not None:
            call.ctx = ctx
        if call.expiry is not None:
            call.expiry.cancel()
        waiting, call.reply, call.question = call.reply, None, None
        if not waiting.done():
            waiting.set_result(reply)
        return call

    async def on_elicit(self, context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        """The client's ``elicitation_callback``: the question goes to the call that asked it,
        and this waits (the server's request stays open) until the user answers."""
        if not isinstance(params, mt.ElicitRequestFormParams):
            log.warning("MCP server %s asked the user to open a URL (URL elicitation); declined: "
                        "turnstream answers form questions", self.server)
            return mt.ElicitResult(action="decline")
        call = self._asking("a question")
        if call is None:
            return mt.ElicitResult(action="decline")
        return await self._ask(call, params)

    async def on_sample(self, context: ClientRequestContext, params: mt.CreateMessageRequestParams
                        ) -> mt.CreateMessageResult | mt.ErrorData:
        """The client's ``sampling_callback``: the model of the turn whose call the request
        came from answers it, after the user approved it (``ask``); an error under ``deny``,
        or when the request cannot be placed or passed on."""
        if self.sampling == "deny":
            return refusal("sampling is turned off in this turnstream (TURNSTREAM_MCP_SAMPLING=deny)")
        call = self._asking("to use the model")
        if call is None:
            return refusal("the request could not be matched to one running call of this server")
        try:
            turns = turns_of(params)
        except InvalidValue as exc:
            return refusal(str(exc), mt.INVALID_PARAMS)
        if self.sampling == "ask":
            reply = await self._ask(call, question(self.server, params, turns))
            if reply.action != "accept":
                return refusal(f"the user declined the request to use the model ({reply.action})")
        ctx = call.ctx
        if ctx is None or ctx.sampler is None:
            return refusal("no model to ask: the call does not run in a turn")
        try:
            sampled = await ctx.sampler.complete(ctx.tool_use_id, turns, system=params.system_prompt,
                                                 max_tokens=params.max_tokens)
        except ProviderError as exc:
            log.warning("MCP server %s: its sampling request failed: %s: %s", self.server, type(exc).__name__, exc)
            return refusal(f"the model could not answer: {type(exc).__name__}: {exc}", mt.INTERNAL_ERROR)
        return result_of(sampled)

    def _asking(self, what: str) -> LiveCall | None:
        """The one running call without an open question, which a request must come from."""
        running = [c for c in self._calls.values() if c.reply is None and not c.task.done()]
        if len(running) != 1:
            log.warning("MCP server %s asked %s while %d of its calls ran; declined (the request does "
                        "not say which call it is from)", self.server, what, len(running))
            return None
        return running[0]

    async def _ask(self, call: LiveCall, params: mt.ElicitRequestFormParams) -> mt.ElicitResult:
        """Put ``params`` to the user as ``call``'s question, and wait for the answer."""
        waiting: asyncio.Future[mt.ElicitResult] = asyncio.get_running_loop().create_future()
        call.question, call.reply = params, waiting
        call.asked.set()
        try:
            return await waiting
        finally:
            if call.reply is waiting:
                call.reply = None

    def _end(self, call: LiveCall) -> None:
        """Let go of ``call``: an open question is answered ``cancel``, a running task cancelled."""
        self._calls.pop(call.key, None)
        if call.expiry is not None:
            call.expiry.cancel()
        if call.reply is not None and not call.reply.done():
            call.reply.set_result(mt.ElicitResult(action="cancel"))
        call.reply = None
        if not call.task.done():
            call.task.cancel()

    def close(self) -> None:
        for call in list(self._calls.values()):
            self._end(call)


def _settled(task: asyncio.Task[CallResult]) -> None:
    """Read the outcome of a call's task, so one that ends after everyone let go of it (an
    expired question on a connection that then broke) is not logged as never retrieved."""
    if not task.cancelled():
        task.exception()


__all__ = ["HOLD_LIMIT", "LiveCall", "LiveCalls"]
