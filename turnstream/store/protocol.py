"""The storage contract every backend fulfils (memory, SQLite, PostgreSQL).

One protocol, one contract suite (``tests/contract/test_store_contract.py``) run against
every backend. What the runtime relies on:

* A block is written when it stops, together with its ``block_stop`` event, in one
  transaction (``append_block``); a status change may ride in the same transaction.
* ``seq`` (blocks) rises by one per turn without gaps. ``n`` (events) rises within a turn
  but has gaps: live-only deltas take numbers too, and are not stored. A write whose
  ``seq`` is taken, or whose ``n`` is not above the turn's last stored ``n``, raises
  ``SeqConflictError``. A reader tailing ``events_after(turn_id, n)`` never skips a row,
  even with concurrent writers.
* Writes may carry ``pending`` events: events of the same turn numbered below the write's
  own event, stored in the same transaction and before it, so that ``n`` order holds. The
  runner holds back an event nobody has seen yet (a ``step_start`` when nothing listens to
  the turn live) until the turn's next write, saving a statement per step: a crash in
  between loses at most that event, which is harmless (the replay of an interrupted turn
  does not need it, and its number is simply a gap). An event is never published before it
  is stored, so a replaying client (``server/follow.py``) cannot miss one.
* ``create_turn(first_event=…)`` stores the turn's first event (``turn_start``) with the turn,
  in one transaction.
* ``discard_step`` removes a restarted step's blocks but keeps its events: the stored
  ``step_restart`` event tells a replaying client to drop them, as it told live clients.
* A turn id or session id that does not exist raises ``KeyError`` on writes and gives
  ``None`` / ``[]`` / ``0`` on reads.

Why one module of this size: the contract is one decision, read by three backends and one
contract suite; splitting its methods across files would hide which of them a backend owes.
* At most one turn per session is ``running`` or ``awaiting_client``; a write that would
  break this raises ``TurnConflictError``.
* Only committed rows are published; the caller publishes after the call returns.
* ``claim_turn`` is an atomic compare-and-set on a turn's status, so that exactly one
  process continues a turn whose last tool result just arrived.
* Ownership: every store has a ``runner_id``, and a turn set ``running`` remembers the runner
  that did it. A write to a ``running`` turn by any other runner is refused
  (``TurnTakenOver``), so at most one process ever writes a running turn.
* Liveness, exact rather than a timeout: while a store is open its runner holds a lock that
  the system releases the moment the process dies (a PostgreSQL session advisory lock, a
  file lock beside a SQLite file). ``dead_runners()`` names the runners of running turns
  whose lock is free (or, with ``stale_after``, that stopped beating: a hung process), and
  ``adopt_turns`` moves their running turns to this runner, atomically, so that exactly one
  process continues each (or ends it, ``lifecycle.close_out``).
* Notebook data files (``put_notebook_file`` …) are kept whole, per session, and go with it.
  ``put_notebook_file`` checks the session's total against ``max_total`` in the transaction
  that stores the file, so two uploads at once cannot pass the cap together.
* The tool-effect ledger: ``start_tool_calls`` records that server tool calls are about to
  run (with their idempotency keys; a restart counts an attempt); ``end_tool_call`` records
  the end of a call that ended while others of its step still ran, with its result; the
  write of a call's ``tool_result`` block records its end in the same transaction (keeping
  an end recorded before). ``tool_calls`` reads it.
* The audit trail: ``record_tool_decisions`` keeps who approved or denied a call, when and
  why (one row per call: a later decision on the same call replaces it); ``grant_tool``
  keeps the tools a session always allows. Both go with their turn or session.
* Budget counters (``charge_step``): a step's tokens and cost are added to the counters of
  its scopes (``turn:…``, ``session:…``, ``user:…:YYYY-MM-DD``) exactly once per
  ``(turn, step)``, atomically with the record that the step was charged, so that two
  processes adding to one user's day lose nothing, and a step charged twice (a turn
  taken over) counts once. Counters outlive their sessions: deleting a chat does not
  give a user's day back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..blocks import Attachment, Block, Session, Turn, TurnStatus, TurnStopReason, Usage
from ..errors import FileTooLarge, InvalidValue, SeqConflictError
from ..events import StreamEvent, decode


@dataclass(slots=True)
class User:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A server tool call about to run: its id, the tool's name, the key it receives."""

    tool_use_id: str
    tool: str
    idempotency_key: str


DecisionSource = Literal["user", "session_grant", "approver"]
"""Who took a decision: a user answering the request, no one (the tool is always allowed in
the session: ``decided_by`` is who granted it), or the library's approver callback."""


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The approval or denial of one call that needed approval (the audit trail)."""

    tool_use_id: str
    tool: str
    approved: bool
    source: DecisionSource
    decided_by: str
    decided_at: float
    reason: str | None = None
    always: bool = False
    """This approval also allowed the tool for the rest of the session (``grant_tool``)."""


@dataclass(frozen=True, slots=True)
class ToolGrant:
    """A tool a session always allows: who allowed it, and when."""

    tool: str
    granted_by: str
    granted_at: float


@dataclass(frozen=True, slots=True)
class Spend:
    """One budget scope's counter: what was spent, and what the user allowed beyond its ceiling."""

    tokens: int = 0
    nano_usd: int = 0
    granted_tokens: int = 0
    granted_nano_usd: int = 0


@dataclass(frozen=True, slots=True)
class NotebookFile:
    """A stored data file of a session's notebook, without its bytes."""

    name: str
    size: int
    sha256: str
    info: dict[str, Any]
    """What was read from it at upload (``notebook.files.FileInfo.to_dict()``)."""
    created_at: float


@dataclass(slots=True)
class QueuedMessage:
    """A message sent while a turn of its session ran, waiting for the runner's next step."""

    id: int
    session_id: str
    text: str
    attachments: list[Attachment]
    created_at: float


@dataclass(slots=True)
class ToolCallRecord:
    """A row of the tool-effect ledger."""

    tool_use_id: str
    tool: str
    idempotency_key: str
    state: Literal["started", "finished"]
    attempts: int
    started_at: float
    ended_at: float | None = None
    is_error: bool | None = None
    result: str | None = None
    """The result's text, kept when the call ended before its ``tool_result`` block was
    stored (``end_tool_call``); None otherwise."""

    @property
    def duration(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


@dataclass(slots=True)
class StoredEvent:
    """A non-delta event as stored for replay (SPEC §8 name and data)."""

    turn_id: str
    n: int
    name: str
    data: dict[str, Any]

    @classmethod
    def of(cls, ev: StreamEvent) -> StoredEvent:
        """The record of an event: the one way a stored event is made."""
        return cls(ev.turn_id, ev.n, ev.name, ev.data())

    def event(self) -> StreamEvent:
        """The event this record holds (``InvalidValue`` if its data does not fit its name)."""
        return decode(self.name, self.data, turn_id=self.turn_id, n=self.n)


def check_files_total(name: str, size: int, others: int, max_total: int | None) -> None:
    """``FileTooLarge`` when a file of ``size`` bytes beside ``others`` bytes of the session's
    other files passes ``max_total``."""
    if max_total is not None and others + size > max_total:
        raise FileTooLarge(f"{name} ({size} bytes) would take this notebook's files to {others + size} bytes, "
                           f"over their limit of {max_total} bytes; delete a file first", max_total)


def check_pending(turn_id: str, pending: Sequence[StoredEvent], event: StoredEvent | None) -> int | None:
    """Validate the ``pending`` events of a write whose own event is ``event``: all of turn
    ``turn_id``, numbered in rising order, and below ``event.n`` (``ValueError`` otherwise;
    pending events without an event too). Returns the lowest number the write stores, which
    must be above the turn's last stored ``n``; None when it stores no event."""
    if event is None:
        if pending:
            raise InvalidValue("pending", "pending events need an event of the write to follow them")
        return None
    if event.turn_id != turn_id:
        raise InvalidValue("event", f"event of turn {event.turn_id} given with a write to turn {turn_id}")
    if not pending:
        return event.n
    for p, q in zip(pending, (*pending[1:], event), strict=True):
        if p.turn_id != turn_id:
            raise InvalidValue("pending", f"event of turn {p.turn_id} given with a write to turn {turn_id}")
        if p.n >= q.n:
            raise InvalidValue("pending", f"pending events must be numbered in rising order below {event.n}")
    return pending[0].n


def first_event_of(turn_id: str, first_event: Callable[[str], StoredEvent] | None) -> StoredEvent | None:
    """The first event ``create_turn`` stores with turn ``turn_id``, checked: of that turn
    (``ValueError``) and numbered 1 or more (``SeqConflictError``)."""
    if first_event is None:
        return None
    event = first_event(turn_id)
    if event.turn_id != turn_id:
        raise InvalidValue("first_event", f"event of turn {event.turn_id} given as the first event of {turn_id}")
    if event.n < 1:
        raise SeqConflictError(f"event {event.n} is not above 0, the last event of the new turn {turn_id}")
    return event


class Store(Protocol):
    runner_id: str
    """Identifies this process (this store object) as the runner of the turns it sets running."""

    async def open(self) -> None:
        """Create or migrate the schema, and register this runner. Idempotent."""
        ...

    async def aclose(self) -> None:
        """Release connections and unregister this runner (its running turns become recoverable)."""
        ...

    # users -----------------------------------------------------------------
    async def create_user(self, name: str) -> tuple[User, str]:
        """Create a user; return it and its API key (only a hash of the key is stored).
        ``UserExists`` when another user has that name."""
        ...

    async def user_by_key(self, api_key: str) -> User | None: ...

    # sessions --------------------------------------------------------------
    async def create_session(
        self, user_id: str, *, title: str = "", model: str = "", toolset: str | None = None,
        session_id: str | None = None, agents: list[dict[str, Any]] | None = None,
        current_agent: str | None = None,
    ) -> Session:
        """Create a session; ``ValueError`` if ``session_id`` is given and already taken.
        ``agents``: the configuration of a session of several agents (docs/agents.md)."""
        ...

    async def set_current_agent(self, session_id: str, name: str) -> bool:
        """Record which agent answers the session's next message; False if there is no such session."""
        ...

    async def get_session(self, session_id: str, *, with_turns: bool = False) -> Session | None: ...

    async def list_sessions(self, user_id: str) -> list[Session]: ...

    async def rename_session(self, session_id: str, title: str) -> bool:
        """Set the session's title; False if there is no such session."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Delete the session with its turns, blocks, events and notebook; False if absent."""
        ...

    # turns -----------------------------------------------------------------
    async def create_turn(
        self, session_id: str, input: str, *, model: str, client_tools: list[dict[str, Any]] | None = None,
        first_event: Callable[[str], StoredEvent] | None = None, parent_turn_id: str | None = None,
    ) -> Turn:
        """Start a turn (status ``running``). Raises TurnConflictError when the session
        already has a turn ``running`` or ``awaiting_client``, on whichever branch.

        The turn follows ``parent_turn_id`` (``InvalidValue("parent_turn_id")`` unless it is
        a turn of the session; ``""``, ``branches.ROOT``, for none: a new first turn), or
        else (None) the session's current leaf; it becomes the leaf.

        ``first_event`` is called with the new turn's id; the event it returns (of that turn,
        ``n`` ≥ 1, e.g. ``turn_start``) is stored in the same transaction as the turn, as if
        by ``append_event`` right after it. ``ValueError`` for an event of another turn."""
        ...

    async def set_current_leaf(self, session_id: str, turn_id: str) -> None:
        """Make ``turn_id`` the session's current leaf (the branch shown, which a new turn
        follows). ``NotFound`` for no such session, ``InvalidValue("turn_id")`` for a turn
        not of the session."""
        ...

    async def get_turn(self, turn_id: str) -> Turn | None:
        """The turn with its blocks in ``seq`` order."""
        ...

    async def list_turns(self, session_id: str) -> list[Turn]:
        """Every turn of the session, oldest first, with blocks."""
        ...

    async def client_tools(self, turn_id: str) -> list[dict[str, Any]]: ...

    async def append_block(self, turn_id: str, block: Block, event: StoredEvent,
                           status: TurnStatus | None = None, *, pending: Sequence[StoredEvent] = ()) -> None:
        """Store a finished block and its ``block_stop`` event (and optionally a new status)
        in one transaction. ``block.seq`` must be the next seq of the turn.

        ``pending``: earlier events of the turn not stored yet (numbered in rising order below
        ``event.n``, else ``ValueError``), stored in the same transaction before ``event``;
        the first must be above the turn's last stored ``n`` (else ``SeqConflictError`` and
        nothing is stored). The same holds for ``append_event`` and ``finish_turn``."""
        ...

    async def discard_step(self, turn_id: str, step: int) -> None:
        """Remove the blocks of a step whose stream broke and is being restarted (the step is
        always the turn's last, so ``seq`` stays gapless). Events are kept."""
        ...

    async def append_event(self, event: StoredEvent, status: TurnStatus | None = None, *,
                           pending: Sequence[StoredEvent] = ()) -> None:
        """Store a non-block event (turn_start, step_start, tool_request, …), after ``pending``
        (see ``append_block``)."""
        ...

    async def events_after(self, turn_id: str, n: int) -> list[StoredEvent]:
        """Stored events of the turn with a number above ``n``, in order."""
        ...

    async def last_event_n(self, turn_id: str) -> int:
        """The highest event number stored for the turn (0 when none)."""
        ...

    async def set_status(self, turn_id: str, status: TurnStatus) -> None: ...

    async def claim_turn(self, turn_id: str, expected: TurnStatus, new: TurnStatus) -> bool:
        """Atomically move a turn from ``expected`` to ``new``; False if it was not ``expected``."""
        ...

    async def finish_turn(
        self, turn_id: str, *, status: TurnStatus, stop_reason: TurnStopReason | None, usage: Usage,
        steps: int, error: str | None = None, event: StoredEvent | None = None,
        step_usage: Sequence[Usage] = (), pending: Sequence[StoredEvent] = (),
    ) -> None:
        """Record the end of a turn (status, stop reason, usage, steps) with its final event,
        after ``pending`` (see ``append_block``; pending events need ``event``)."""
        ...

    async def heartbeat(self) -> None:
        """Tell other processes this runner is alive (not hung). Call it more often than
        the ``stale_after`` the other processes pass to ``dead_runners``."""
        ...

    async def dead_runners(self, *, stale_after: float | None = None) -> set[str]:
        """Runners other than this one that own ``running`` turns and are gone: their
        liveness lock is free (the process died, or closed its store), or, with
        ``stale_after``, they have not beaten for that many seconds."""
        ...

    async def adopt_turns(self, runners: Collection[str]) -> list[str]:
        """Make this runner the owner of every ``running`` turn of ``runners``; return the
        ids taken. Atomic: a turn two processes adopt at once goes to one of them."""
        ...

    # the tool-effect ledger -------------------------------------------------
    async def start_tool_calls(self, turn_id: str, calls: Sequence[ToolCallStart]) -> None:
        """Record that these server tool calls of a turn are about to run (an attempt more,
        for a call that ran before). ``NotFound`` for an unknown turn."""
        ...

    async def end_tool_call(self, turn_id: str, tool_use_id: str, result: str, is_error: bool) -> None:
        """Record that a started call ended, with its result (kept until the call's
        ``tool_result`` block is stored). ``NotFound`` for an unknown turn; nothing for a
        call that has no row."""
        ...

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The turn's ledger, in the order the calls first started."""
        ...

    # the audit trail ----------------------------------------------------------
    async def record_tool_decisions(self, turn_id: str, decisions: Sequence[ToolDecision]) -> None:
        """Keep the decisions taken on calls of a turn (one per call: a later one on the same
        call replaces it). ``NotFound`` for an unknown turn."""
        ...

    async def tool_decisions(self, turn_id: str) -> list[ToolDecision]:
        """The turn's decisions, oldest first."""
        ...

    async def grant_tool(self, session_id: str, tool: str, granted_by: str) -> None:
        """Always allow ``tool`` in the session from now on (a second grant keeps the first).
        ``NotFound`` for an unknown session."""
        ...

    async def tool_grants(self, session_id: str) -> list[ToolGrant]:
        """The tools the session always allows, by name ([] for an unknown session)."""
        ...

    # budgets ---------------------------------------------------------------
    async def charge_step(self, turn_id: str, step: int, scopes: Sequence[str], tokens: int,
                          nano_usd: int) -> dict[str, Spend] | None:
        """Add a step's spending to each scope's counter, once per ``(turn_id, step)``, and
        return the counters after it; None (nothing added) when that step was charged before.
        ``NotFound`` for an unknown turn."""
        ...

    async def budget_spend(self, scopes: Sequence[str]) -> dict[str, Spend]:
        """The counters of these scopes (a scope never charged reads as zero)."""
        ...

    async def grant_budget(self, scope: str, tokens: int, nano_usd: int) -> None:
        """Allow a scope this much more beyond its ceiling (added to what was granted)."""
        ...

    # notebooks -------------------------------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any], *, base: int | None = None) -> int:
        """Store the session's notebook document; return its new version (1, 2, …).
        ``base``: only if the stored version is still this one (0: no notebook saved yet),
        else ``StaleNotebook`` and nothing is stored. ``KeyError`` if the session does not
        exist."""
        ...

    async def load_notebook(self, session_id: str) -> dict[str, Any] | None:
        """The last saved notebook document of the session, with ``version`` set to the
        version ``save_notebook`` returned for it (the store's, whatever the document said),
        or None."""
        ...

    async def runner_alive(self, runner_id: str) -> bool:
        """Whether the runner ``runner_id`` still holds its liveness lock (this one always does)."""
        ...

    async def put_notebook_file(self, session_id: str, name: str, data: bytes, info: dict[str, Any], *,
                                max_total: int | None = None) -> NotebookFile:
        """Store a data file, replacing one of the same name. ``NotFound`` for an unknown
        session; ``FileTooLarge`` when the session's files would pass ``max_total`` bytes."""
        ...

    async def notebook_files(self, session_id: str) -> list[NotebookFile]:
        """The session's data files, by name."""
        ...

    async def notebook_file_data(self, session_id: str, name: str) -> bytes | None:
        """A data file's bytes, or None."""
        ...

    async def delete_notebook_file(self, session_id: str, name: str) -> bool:
        """Remove a data file; False if there was none."""
        ...

    # images and files, and messages queued while a turn runs -----------------------
    async def put_blob(self, data: bytes, media_type: str) -> str:
        """Store bytes once, by their SHA-256 (hex), which is returned; the same bytes again
        store nothing."""
        ...

    async def get_blobs(self, hashes: Collection[str]) -> dict[str, bytes]:
        """The stored bytes of each known hash (unknown ones are left out)."""
        ...

    async def queue_message(self, session_id: str, text: str,
                            attachments: Sequence[Attachment] = ()) -> QueuedMessage | None:
        """Queue a message for the session's running turn, atomically with the check that one
        runs (status ``running``); None when none does (nothing is stored)."""
        ...

    async def take_queued(self, session_id: str) -> list[QueuedMessage]:
        """Remove and return the session's queued messages, oldest first."""
        ...
