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
  run (with their idempotency keys; a restart counts an attempt); the write of a call's
  ``tool_result`` block records its end in the same transaction. ``tool_calls`` reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..blocks import Block, Session, Turn, TurnStatus, TurnStopReason, Usage
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
        session_id: str | None = None,
    ) -> Session:
        """Create a session; ``ValueError`` if ``session_id`` is given and already taken."""
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
        first_event: Callable[[str], StoredEvent] | None = None,
    ) -> Turn:
        """Start a turn (status ``running``). Raises TurnConflictError when the session
        already has a turn ``running`` or ``awaiting_client``.

        ``first_event`` is called with the new turn's id; the event it returns (of that turn,
        ``n`` ≥ 1, e.g. ``turn_start``) is stored in the same transaction as the turn, as if
        by ``append_event`` right after it. ``ValueError`` for an event of another turn."""
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

    async def tool_calls(self, turn_id: str) -> list[ToolCallRecord]:
        """The turn's ledger, in the order the calls first started."""
        ...

    # notebooks -------------------------------------------------------------
    async def save_notebook(self, session_id: str, doc: dict[str, Any]) -> int:
        """Store the session's notebook document; return its new version (1, 2, …).
        ``KeyError`` if the session does not exist."""
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
