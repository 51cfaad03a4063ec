"""Every exception turnstream raises, in one tree.

    TurnstreamError
    ├── UsageError                 you misused the library (bad model name, bad tool, bad config)
    │   ├── MissingExtraError      an optional part is not installed; says what to install
    │   └── InvalidValue           an argument that cannot be used; ``field`` names it (a ValueError)
    ├── Refused                    the call does not fit the state it found; nothing was changed
    │   ├── NotFound               no such session, turn or pending tool call (a KeyError)
    │   ├── AlreadyExists          the id asked for is taken (a ValueError)
    │   │   └── UserExists         a user of that name exists already
    │   ├── TurnConflictError      another turn of the session is open
    │   ├── TurnNotWaiting         the turn is not waiting for tool results
    │   ├── TurnTakenOver          another process owns this running turn now
    │   ├── SeqConflictError       another writer took the turn's next ``seq`` or ``n`` first
    │   ├── EditConflict           a notebook cell changed since the caller read it
    │   └── FileTooLarge           a data file, or a notebook's files together, over their limit
    ├── RunError                   the run failed, for a reason outside the caller's code
    │   ├── ProviderError          the provider said no, or its stream broke
    │   │   ├── ProviderStatusError    an HTTP error status before the stream started
    │   │   │   └── ContextTooLong     the request is too long for the model, even cleared
    │   │   ├── ProviderStreamError    an error event inside a stream that had started
    │   │   ├── StreamBrokenError      the connection dropped, a chunk was malformed, or the
    │   │   │                          stream ended without its final event
    │   │   └── ProviderProtocolError  the answer breaks the API's wire protocol: a 200 whose
    │   │                              body is not an event stream, events in an order no
    │   │                              provider sends (a block opened twice); not retried
    │   ├── StoreError             the store failed (closed, unknown migrations, a write refused)
    │   │   └── StoreWriteError    storing one of a turn's events failed; ``__cause__`` says why
    │   ├── KernelError            a notebook kernel could not be started
    │   │   ├── SandboxUnavailable no sandbox can start here, so no cell runs (says what to do)
    │   │   └── OutputTooLarge     a kernel sent more than a cell may return (its run ends; the cell
    │   │                          says so)
    │   ├── Overloaded             the server could not admit a new turn in time
    │   ├── ShuttingDown           the server is stopping and takes no new turn
    │   ├── RemoteError            talking to a turnstream server failed (the chat's client)
    │   │   ├── ServerError        the server answered with an error status
    │   │   └── RemoteStreamBroken an event stream from the server was cut off
    │   └── TurnCancelled          the turn was cancelled on purpose
    ├── ToolError                  a tool refused its input; the model reads ``TypeName: message``
    │   ├── ToolInputError         the arguments do not match the tool's schema
    │   ├── PathOutsideRootError   a path that leaves the tool's root directory
    │   ├── NotATextFileError      a file that is binary, not a regular file, or too large
    │   ├── CalculatorError        an expression the calculator does not take
    │   ├── UnknownCellError       no notebook cell with that id
    │   ├── MCPToolError           an MCP server answered a call with ``isError``
    │   └── MCPServerError         an MCP call got no result (unreachable, stopped, protocol error)
    ├── InputNeeded                a tool asks the user for input (an MCP elicitation): the turn pauses
    ├── ApiError                   an HTTP answer other than success, raised below a server route
    └── SimulatedFault             the mock provider cuts a connection on purpose (a scripted fault)

Some leaves also derive from the built-in exception a caller would expect (``NotFound`` is a
``KeyError``, ``InvalidValue`` a ``ValueError``, ``PathOutsideRootError`` a ``PermissionError``),
so ``except KeyError`` keeps working. Foreign exceptions (httpx, json, the database drivers)
are mapped where they enter, with ``raise … from``. The server maps these classes to HTTP
statuses by type (``server/errors.py``), never by reading their messages.

Why one module of this size: the tree is one thing to read; a caller looks up every class
turnstream may raise in one place.
"""

from __future__ import annotations

from typing import Any


class TurnstreamError(Exception):
    """Base of every turnstream exception."""


# --- you misused it -----------------------------------------------------------------------------


class UsageError(TurnstreamError):
    """The library was called wrongly; fix the calling code."""


class MissingExtraError(UsageError, ImportError):
    def __init__(self, extra: str, module: str) -> None:
        super().__init__(f"{module} is needed for this; install it with: pip install 'turnstream[{extra}]'")


class InvalidValue(UsageError, ValueError):
    """A value the call cannot use. ``field`` names the argument (``"approved"``, ``"content"``);
    ``path`` the place inside it, when it is JSON (``("colors", 0)``)."""

    def __init__(self, field: str, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.path = path


class ContentRejected(UsageError, ValueError):
    """An image or file a message cannot take (content.py): ``field`` names it (e.g.
    ``["parts", 1, "data"]``); ``status`` is 413 (too large, too many) or 422 (a type or bytes
    not accepted)."""

    def __init__(self, field: list[str | int], message: str, status: int = 422) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


# --- the state says no --------------------------------------------------------------------------


class Refused(TurnstreamError):
    """The call does not fit the state it found (an unknown id, a turn in another status)."""


class NotFound(Refused, KeyError):
    """No such session, turn or pending tool call. ``what`` says which."""

    def __init__(self, what: str, message: str | None = None) -> None:
        self.what = what
        self.message = message or f"{what} not found"
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class AlreadyExists(Refused, ValueError):
    """The id asked for is taken (e.g. a session id given to ``create_session``)."""


class UserExists(AlreadyExists):
    """``create_user`` was given a name that another user has: names identify users to people
    (``turnstream users add``), so two users never share one."""

    def __init__(self, name: str) -> None:
        super().__init__(f"a user named {name!r} exists already")
        self.name = name


class TurnConflictError(Refused):
    """A turn is already running (or awaiting the client) in this session."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id} is still running in this session")
        self.turn_id = turn_id


class TurnNotWaiting(Refused, LookupError):
    """The turn is not waiting for tool results (it runs, or it has ended). ``status`` is its status."""

    def __init__(self, turn_id: str, status: str) -> None:
        super().__init__(f"turn {turn_id} is not waiting for tool results (status: {status})")
        self.turn_id = turn_id
        self.status = status


class TurnTakenOver(Refused):
    """A write to a running turn that another runner owns now (it took the turn over,
    believing this one gone): this runner must stop, and write nothing more."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"turn {turn_id} is run by another process now")
        self.turn_id = turn_id


class SeqConflictError(Refused):
    """Another writer took this turn's next ``seq`` or ``n`` first; re-read and try again."""


class StaleNotebook(Refused):
    """A notebook save on the condition that the store still held the version the saver last
    read: another process saved since. The saver merges (``notebook.merge``) and saves again."""

    def __init__(self, session_id: str, base: int) -> None:
        super().__init__(f"the notebook of session {session_id} changed since version {base}")
        self.session_id = session_id
        self.base = base


class EditConflict(Refused):
    """An edit made from a copy of a cell that is no longer current (someone else changed
    its code meanwhile). ``cell`` is the cell as it stands now; nothing was changed."""

    def __init__(self, cell_id: str, cell: dict[str, Any]) -> None:
        super().__init__(f"cell {cell_id} was changed by someone else since you read it; "
                         "its current code is in 'cell'")
        self.cell_id = cell_id
        self.cell = cell


class FileTooLarge(Refused):
    """A notebook data file larger than ``limit`` bytes, or one that would take the notebook's
    files together past their ``limit``; nothing was stored."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


# --- the run failed -----------------------------------------------------------------------------


class RunError(TurnstreamError):
    """A run failed for a reason outside the caller's code."""


class ProviderError(RunError):
    """The provider refused or failed. ``retryable`` says whether trying again can help."""

    code: str = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        api_code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type
        self.retryable = retryable
        self.retry_after = retry_after
        self.api_code = api_code
        """The API's own error code when it sent one that is not an HTTP status
        (OpenAI's ``"context_length_exceeded"``, ``"rate_limit_exceeded"``)."""

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.message!r}, status={self.status}, "
                f"error_type={self.error_type!r}, retryable={self.retryable})")


class ProviderStatusError(ProviderError):
    code = "provider_status"


class ProviderStreamError(ProviderError):
    code = "provider_stream_error"


class StreamBrokenError(ProviderError):
    code = "stream_broken"


class ContextTooLong(ProviderStatusError):
    """The provider refused a step's request as too long for the model's context window, and
    still did after turnstream cleared what it could and asked once more (docs/context.md)."""

    code = "context_too_long"


class ProviderProtocolError(ProviderError):
    """The server answered in a form the API never uses: ``200`` with a body that holds no
    event, or events in an order no provider sends (a delta for a block that is not open).
    An incompatible or misconfigured server: trying again rarely helps, so it is not retried,
    but for an empty body (a gateway's cut connection looks the same)."""

    code = "stream_protocol"


class StoreError(RunError):
    """The store failed: it is closed, its schema is from a newer turnstream, or a write failed."""


class StoreWriteError(StoreError):
    """Storing one of a turn's events failed (e.g. the database restarted); ``__cause__`` is
    the store's error."""


class KernelError(RunError):
    """A notebook kernel could not be started."""


class SandboxUnavailable(KernelError):
    """The notebook sandbox cannot start here; the message says what to do about it."""


class OutputTooLarge(KernelError):
    """A kernel sent a reply longer than the output limit (the kernel is stopped, and the
    cell's result says why)."""


class KernelProtocolError(KernelError, ValueError):
    """A kernel sent a line its protocol does not allow (a cell may write to the kernel's
    pipes itself): the run ends with this error on its cell and the kernel is stopped."""


class Overloaded(RunError):
    """The server cannot start a new turn within its admission wait; try again later (or
    elsewhere: nothing was stored)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the server is at capacity and could not start the turn in time; nothing was stored; "
                         f"try again in {retry_after} s")
        self.retry_after = retry_after


class ShuttingDown(RunError):
    """The server is shutting down and takes no new turn; send the message again in a moment
    (another server process, or this one once restarted, takes it)."""

    retry_after = 1

    def __init__(self) -> None:
        super().__init__("the server is shutting down; send the message again in a moment")


class RemoteError(RunError):
    """Talking to a turnstream server failed; the message is meant for the user as it is."""


class ServerError(RemoteError):
    """The server answered with an error status (its JSON body: ``error``, ``message``, ``detail``)."""

    def __init__(self, status: int, message: str, description: str,
                 detail: list[dict[str, Any]] | None = None, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.message = message
        self.detail = detail or []
        self.retry_after = retry_after
        """Seconds the server asked to wait before trying again (``Retry-After`` of a 503)."""


class RemoteStreamBroken(RemoteError):
    """An event stream that had started was cut off; it can be followed again from the last id."""


class TurnCancelled(RunError):
    """The turn was cancelled by its owner."""


# --- a tool refused its input -------------------------------------------------------------------


class ToolError(TurnstreamError):
    """A tool refused its input. The model reads it as ``TypeName: message``, so the class
    names below are part of what the model sees."""


class ToolInputError(ToolError, ValueError):
    """The arguments do not match the tool's schema; the message lists each problem."""


class MCPToolError(ToolError):
    """The MCP server answered the call with ``isError`` (the text is the server's)."""


class MCPServerError(ToolError):
    """An MCP call got no result: the server could not be reached, stopped during the call,
    or answered with a protocol error."""


class InputNeeded(TurnstreamError):
    """Raised by a tool that needs the user's input to go on (an MCP server's elicitation).

    The turn pauses ``awaiting_client`` with a ``tool_request`` carrying ``message`` and
    ``requested_schema`` (JSON Schema of the answer); the client answers through the
    tool-results route, and the call runs again with ``ToolContext.answer`` set. ``state`` is
    stored with the request and handed back in the answer (opaque to everyone but the tool)."""

    def __init__(self, message: str, requested_schema: dict[str, Any], state: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.requested_schema = requested_schema
        self.state = state

    def request(self) -> dict[str, Any]:
        """The ``elicitation`` object of the ``tool_request`` event."""
        return {"message": self.message, "requested_schema": self.requested_schema, "state": self.state}


class PathOutsideRootError(ToolError, PermissionError):
    """A path that resolves outside the tool's root directory."""


class NotATextFileError(ToolError, ValueError):
    """A file that is binary, not a regular file (a pipe, a device), or too large to read as text."""


class CalculatorError(ToolError, ValueError):
    """An expression the calculator does not take (not arithmetic, too large, divided by zero)."""


class UnknownCellError(ToolError, ValueError):
    """No cell with that id in the notebook."""


# --- the edges ----------------------------------------------------------------------------------


class ApiError(TurnstreamError):
    """An answer other than success, raised anywhere below a server route; the server turns
    it into ``{"error": code, "message": …, "detail"?: […]}`` with its status."""

    def __init__(self, status: int, code: str, message: str, detail: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
        self.headers = headers
        self.extra = extra
        """More fields of the body (an edit conflict's current ``cell``)."""


class SimulatedFault(TurnstreamError):
    """Raised inside the mock provider's streaming body to make its server cut the connection."""


__all__ = [
    "AlreadyExists",
    "ApiError",
    "CalculatorError",
    "ContentRejected",
    "ContextTooLong",
    "EditConflict",
    "FileTooLarge",
    "InputNeeded",
    "InvalidValue",
    "KernelError",
    "KernelProtocolError",
    "MCPServerError",
    "MCPToolError",
    "MissingExtraError",
    "NotATextFileError",
    "NotFound",
    "OutputTooLarge",
    "Overloaded",
    "PathOutsideRootError",
    "ProviderError",
    "ProviderProtocolError",
    "ProviderStatusError",
    "ProviderStreamError",
    "Refused",
    "RemoteError",
    "RemoteStreamBroken",
    "RunError",
    "SandboxUnavailable",
    "SeqConflictError",
    "ServerError",
    "ShuttingDown",
    "SimulatedFault",
    "StaleNotebook",
    "StoreError",
    "StoreWriteError",
    "StreamBrokenError",
    "ToolError",
    "ToolInputError",
    "TurnCancelled",
    "TurnConflictError",
    "TurnNotWaiting",
    "TurnTakenOver",
    "TurnstreamError",
    "UnknownCellError",
    "UsageError",
    "UserExists",
]
