"""Budgets: what each step costs, counted where every process sees it, and what the loop
does when a ceiling is reached (docs/budgets.md).

The loop calls ``Meter`` at two points: ``after_step`` once a step's usage is known (it
emits the step's ``usage`` event, charges the store's counters, warns, and says whether a
ceiling was reached), and ``on_resume`` when a turn that paused continues (it grants more
budget when the user approved, or says the user declined). The pause itself is an ordinary
approval request (``tool_request`` with ``budget`` set) for each call of the step, so every
client and protocol that handles approvals handles budgets too.

Counting: a step is charged once, keyed by ``(turn, step)``, to the counters of the turn,
its session and its user's UTC day (``Store.charge_step``), only when some ceiling is set.
A stream that broke and was restarted is not charged (its usage never arrived); the final
tools-off step after a ceiling is charged like any other, so a scope can end a little over
its ceiling.

A step whose server reported no token counts (``Usage.unknown``: llama.cpp's server sends
none) is charged an estimate instead of nothing, so such a server is metered too: the
characters of the transcript the step read (the session's earlier turns, this turn's input
and steps before it) and of what it wrote, at ``CHARS_PER_TOKEN``. The ``usage`` event
still says unknown; the pause's note says the count is an estimate.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Literal

from .blocks import BLOCK_ADAPTER, Block, ToolResultBlock, ToolUseBlock, Usage
from .branches import path
from .events import BudgetReached, BudgetScope, BudgetWarning, StepUsage, ToolRequest
from .lifecycle import TurnRecorder
from .limits import Budgets, Ceiling
from .pricing import PRICES, Price, cost, dollars, price_of, tokens
from .store.protocol import Spend, Store, StoredEvent

log = logging.getLogger("turnstream.budgets")

REACHED_NOTE = ("Budget reached: {what} has used {spent} of its {limit}. Approve to continue with another "
                "{extra}; deny to get an answer now, without tools.")
ANSWER_NOW = ("Not run: {what} reached its budget ({spent} of {limit}). Answer now with what you have.")
BUDGET_SPENT = "Not run: this turn's budget is spent. Answer now with what you have."
ESTIMATED = " (Estimated: the server reports no token counts, so turnstream counts the text.)"
CHARS_PER_TOKEN = 3
"""For an estimate: English text runs about four characters a token, JSON and code fewer; three
errs toward counting more, so a ceiling stops a little early rather than late."""
_WHAT: dict[BudgetScope, str] = {"turn": "this turn", "session": "this chat", "user_day": "your day"}


def _amount(tokens_: int | None, nano: int | None) -> str:
    parts = []
    if tokens_ is not None:
        parts.append(f"{tokens_:,} tokens")
    if nano is not None:
        parts.append(dollars(nano))
    return " / ".join(parts)


def describe(r: BudgetReached) -> tuple[str, str, str]:
    """What was spent, the ceiling, and the extra on offer, in words."""
    spent = _amount(r.spent_tokens if r.limit_tokens is not None else None,
                    r.spent_nano_usd if r.limit_nano_usd is not None else None)
    return spent, _amount(r.limit_tokens, r.limit_nano_usd), _amount(r.extra_tokens, r.extra_nano_usd)


def _limit(ceiling: int | None, granted: int) -> int | None:
    return None if ceiling is None else ceiling + granted


class Meter:
    """The budget of one turn's runner: prices its steps, charges them, checks the ceilings."""

    def __init__(self, store: Store, budgets: Budgets, origin: str, prices: Mapping[str, Price] = PRICES) -> None:
        self.store = store
        self.budgets = budgets
        self.provider = origin.partition(":")[0]
        self.price = price_of(origin, prices)
        if self.price is None and budgets.active and (
                budgets.turn.nano_usd or budgets.session.nano_usd or budgets.user_day.nano_usd):
            log.warning("no price for %s: its cost counts as 0 against the cost ceilings (tokens still count)",
                        origin)
        self._user_id: str | None = None
        self._history_chars: int | None = None
        """The size of the session's earlier turns, read once for an estimate."""
        self.estimated = False
        """Some step of this turn was charged an estimate (its usage was unknown)."""
        self.sub_cost = 0
        """What this runner's sub-steps cost (model calls tools asked for: ``sub_step``)."""
        self._subs = 0

    def use(self, origin: str, prices: Mapping[str, Price] = PRICES) -> None:
        """Price the next steps at this model's price (another agent of a team speaks)."""
        self.provider = origin.partition(":")[0]
        self.price = price_of(origin, prices)

    def step_cost(self, usage: Usage) -> int:
        return cost(usage, self.provider, self.price)

    async def _scopes(self, rec: TurnRecorder) -> dict[BudgetScope, str]:
        if self._user_id is None:
            session = await self.store.get_session(rec.session_id)
            self._user_id = session.user_id if session is not None else ""
        day = datetime.datetime.now(datetime.UTC).date().isoformat()
        return {"turn": f"turn:{rec.turn_id}", "session": f"session:{rec.session_id}",
                "user_day": f"user:{self._user_id}:{day}"}

    def _ceiling(self, scope: BudgetScope) -> Ceiling:
        return {"turn": self.budgets.turn, "session": self.budgets.session, "user_day": self.budgets.user_day}[scope]

    async def after_step(self, rec: TurnRecorder, step: int, usage: Usage) -> BudgetReached | None:
        """Emit the step's ``usage`` event; when ceilings are set, charge the step, warn at
        the warning fraction, and return the first scope whose ceiling is reached (None if none)."""
        step_cost = self.step_cost(usage)
        turn_cost = sum(self.step_cost(u) for u in rec.step_usage) + self.sub_cost  # this step included
        await rec.emit(StepUsage(step=step, usage=usage, cost_nano_usd=step_cost, turn_cost_nano_usd=turn_cost))
        return await self.charge(rec, step, usage)

    async def sub_step(self, rec: TurnRecorder, step: int, usage: Usage, tool_use_id: str | None,
                       estimate: Usage) -> BudgetReached | None:
        """A model call the running tool ``tool_use_id`` asked for during ``step`` (an MCP
        server's sampling request), or, without one, that the step made for itself (a summary
        of the conversation's first turns, docs/context.md): its ``usage`` event (a sub-step,
        the turn's cost counting it), and the same charge as a step's, under a key of its own
        (``-(step * 1000 + n)`` for the runner's n-th one, so it never meets a step's).
        ``estimate`` is charged when the server sent no counts. A ceiling it reaches stops the
        turn at its next step, as a step's would; the reached scope is returned for the log."""
        cost_ = self.step_cost(usage)
        self.sub_cost += cost_
        self._subs += 1
        turn_cost = sum(self.step_cost(u) for u in rec.step_usage) + self.sub_cost
        await rec.emit(StepUsage(step=step, usage=usage, cost_nano_usd=cost_, turn_cost_nano_usd=turn_cost,
                                 tool_use_id=tool_use_id))
        return await self.charge(rec, step, estimate if usage.unknown else usage, as_key=-(step * 1000 + self._subs))

    async def charge(self, rec: TurnRecorder, step: int, usage: Usage, *, as_key: int | None = None
                     ) -> BudgetReached | None:
        """``after_step`` without the event: when ceilings are set, charge the step (once per
        step, whoever asks: ``as_key``, the step unless given), warn, and return the first scope
        whose ceiling is reached. A turn taken over after its step's ``usage`` event was stored
        calls this alone."""
        step_cost = self.step_cost(usage)
        if not self.budgets.active:
            return None
        if usage.unknown:
            usage = await self._estimate(rec, step)
            step_cost = self.step_cost(usage)
        step_tokens = tokens(usage, self.provider)
        scopes = await self._scopes(rec)
        totals = await self.store.charge_step(rec.turn_id, step if as_key is None else as_key, list(scopes.values()),
                                              step_tokens, step_cost)
        if totals is None:  # charged before (a turn taken over): look, do not add
            totals = await self.store.budget_spend(list(scopes.values()))
            step_tokens = step_cost = 0
        reached: BudgetReached | None = None
        for scope, key in scopes.items():
            ceiling = self._ceiling(scope)
            if not ceiling.set:
                continue
            spend = totals[key]
            lim_t = _limit(ceiling.tokens, spend.granted_tokens)
            lim_c = _limit(ceiling.nano_usd, spend.granted_nano_usd)
            over = (lim_t is not None and spend.tokens >= lim_t) or (lim_c is not None and spend.nano_usd >= lim_c)
            if over:
                if reached is None:
                    reached = BudgetReached(scope=scope, spent_tokens=spend.tokens, spent_nano_usd=spend.nano_usd,
                                            limit_tokens=lim_t, limit_nano_usd=lim_c, extra_tokens=ceiling.tokens,
                                            extra_nano_usd=ceiling.nano_usd)
                continue
            w = self.budgets.warn_at
            crossed = (lim_t is not None and spend.tokens - step_tokens < w * lim_t <= spend.tokens) or (
                lim_c is not None and spend.nano_usd - step_cost < w * lim_c <= spend.nano_usd)
            if crossed:
                await rec.emit(BudgetWarning(scope=scope, spent_tokens=spend.tokens, spent_nano_usd=spend.nano_usd,
                                             limit_tokens=lim_t, limit_nano_usd=lim_c))
        return reached

    async def _estimate(self, rec: TurnRecorder, step: int) -> Usage:
        """A step's usage from the sizes of what it read and wrote (its server sent none)."""
        if not self.estimated:
            log.warning("turn %s: the server reports no token counts; the budgets count an estimate", rec.turn_id)
        self.estimated = True
        if self._history_chars is None:  # what the turn reads: the path to its parent, not other branches
            turns = await self.store.list_turns(rec.session_id)
            me = next((t for t in turns if t.id == rec.turn_id), None)
            earlier = path(turns, me.parent_turn_id) if me is not None else []
            self._history_chars = sum(len(t.input) + _size(t.blocks) for t in earlier)
        read = self._history_chars + len(rec.user_input) + _size(b for b in rec.blocks if b.step < step)
        wrote = _size(b for b in rec.blocks if b.step == step)
        return Usage(input_tokens=-(-read // CHARS_PER_TOKEN), output_tokens=-(-wrote // CHARS_PER_TOKEN))

    async def pause(self, rec: TurnRecorder, requests: Sequence[ToolRequest], reached: BudgetReached) -> None:
        """Ask the client about each call of the step, saying what was spent; the turn then
        waits (``awaiting_client``)."""
        spent, limit, extra = describe(reached)
        note = REACHED_NOTE.format(what=_WHAT[reached.scope], spent=spent, limit=limit, extra=extra)
        if self.estimated:
            note += ESTIMATED
        for i, req in enumerate(requests):
            req.note, req.budget = note, reached
            if req.executor == "server":
                req.requires_approval = True
            await rec.emit(req, status="awaiting_client" if i == len(requests) - 1 else None)

    def answer_now(self, reached: BudgetReached) -> str:
        """The result of a call not run because a ceiling was reached (``on_limit="answer"``)."""
        spent, limit, _ = describe(reached)
        return ANSWER_NOW.format(what=_WHAT[reached.scope], spent=spent, limit=limit)

    async def on_resume(self, rec: TurnRecorder, events: Sequence[StoredEvent],
                        approved: Collection[str]) -> Literal["granted", "declined"] | None:
        """A paused turn continues. None when its last pause was not for a budget. Else:
        ``granted`` when the user approved a call (or a client ran one), after the reached
        scopes were given another ceiling's worth beyond what they have spent now;
        ``declined`` when every call was denied (the loop then answers with tools off)."""
        last = rec.steps
        calls = {b.tool_use_id for b in rec.blocks if isinstance(b, ToolUseBlock) and b.step == last}
        reached: dict[BudgetScope, BudgetReached] = {}
        for stored in events:
            if stored.name == ToolRequest.name:
                ev = stored.event()
                if isinstance(ev, ToolRequest) and ev.budget is not None and ev.tool_use_id in calls:
                    reached[ev.budget.scope] = ev.budget
        if not reached:
            return None
        results = {b.tool_use_id: b for b in rec.blocks if isinstance(b, ToolResultBlock)}
        yes = any(c in approved or (c in results and not results[c].is_error) for c in calls)
        if not yes:
            return "declined"
        scopes = await self._scopes(rec)
        now = await self.store.budget_spend([scopes[s] for s in reached])
        for scope, r in reached.items():
            spend: Spend = now[scopes[scope]]
            ceiling = self._ceiling(scope)
            more_t = _grant(spend.tokens, ceiling.tokens, spend.granted_tokens, r.extra_tokens)
            more_c = _grant(spend.nano_usd, ceiling.nano_usd, spend.granted_nano_usd, r.extra_nano_usd)
            await self.store.grant_budget(scopes[scope], more_t, more_c)
        return "granted"


def _size(blocks: Iterable[Block]) -> int:
    """Characters of blocks as stored (their JSON: a little more than the text a model reads)."""
    return sum(len(BLOCK_ADAPTER.dump_json(b)) for b in blocks)


def _grant(spent: int, ceiling: int | None, granted: int, extra: int | None) -> int:
    """What to add to ``granted`` so that the scope may spend ``extra`` more from now on."""
    if ceiling is None or extra is None:
        return 0
    return max(spent + extra - (ceiling + granted), 0)


__all__ = ["ANSWER_NOW", "BUDGET_SPENT", "CHARS_PER_TOKEN", "ESTIMATED", "REACHED_NOTE", "Meter", "describe"]
