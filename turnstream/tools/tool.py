"""``@tool``: a typed Python function becomes a tool the model can call.

The docstring's first paragraph is the description; ``Args:`` lines (Google style) describe
the parameters. Type hints become the JSON Schema through pydantic, and the same pydantic
model validates the arguments before the function runs.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import ToolInputError, UsageError
from .sampler import Sampler

Executor = Literal["server", "client"]
DEFAULT_TIMEOUT = 30.0


class ClientSpans(Protocol):
    """What a tool uses of the run's telemetry (``telemetry.otel.Telemetry`` is one): a client
    span around a call to another service, yielding the headers that carry its context."""

    def client_span(self, name: str, attributes: Mapping[str, str | int | float | bool] | None = None,
                    ) -> AbstractContextManager[dict[str, str]]: ...


@dataclass(slots=True)
class ToolContext:
    """Passed to a tool that declares a parameter annotated ``ToolContext`` (left out of the schema)."""

    session_id: str
    turn_id: str
    tool_use_id: str
    deps: dict[str, Any] = field(default_factory=dict)
    """Whatever the host put there, e.g. ``deps["notebook"]`` for the notebook toolset."""
    idempotency_key: str = ""
    """The same on every attempt of this call (a restart after a crash runs an idempotent
    tool again): pass it to the systems the tool writes to, so they apply the effect once."""
    cancel_note: str | None = None
    """What the call's result says if it is cancelled while it runs (a cancelled turn): a tool
    that started something sets it to say what became of that. Unset, the result says the
    call did not finish."""
    answer: dict[str, Any] | None = None
    """The user's answer to what this call asked (``InputNeeded``), when the call runs again
    after it: ``{"action": "accept" | "decline", "content": {...}, "state": ...}``."""
    telemetry: ClientSpans | None = None
    """The run's telemetry when it is on (the call's ``execute_tool`` span is current): a tool
    that calls another service opens a client span with it (``Telemetry.client_span``)."""
    on_progress: Callable[[float, float | None, str | None], None] | None = field(default=None, repr=False)
    """Where ``progress`` goes (the runner's ``tool_progress`` events); None when nobody listens."""
    sampler: Sampler | None = field(default=None, repr=False)
    """The turn's model, for a model call the tool asks for (an MCP server's sampling request),
    metered as a sub-step of the turn; None outside a turn."""

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Say how far the call got: ``done`` of ``total`` (None when unknown), and what it does
        now. Each is a ``tool_progress`` event on every stream of the turn (the web chat's tool
        card, the terminal chat's spinner line); from a sync tool's thread as well."""
        if self.on_progress is not None:
            self.on_progress(float(done), None if total is None else float(total), message)


@dataclass(slots=True)
class Tool:
    """A tool: its schema, how to run it, and its per-tool policy (SPEC §4)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Any] | None = None
    timeout: float = DEFAULT_TIMEOUT
    requires_approval: bool = False
    executor: Executor = "server"
    sequential: bool = False
    idempotent: bool = False
    """Safe to run again with the same arguments (and idempotency key): after a crash while
    it ran, the call is repeated; a tool that is not is repeated only if the user approves."""
    args_model: type[BaseModel] | None = field(default=None, repr=False)
    is_async: bool = False
    context_param: str | None = None
    """Name of the parameter that receives the ``ToolContext``, if any."""

    @classmethod
    def client(cls, name: str, description: str = "", input_schema: dict[str, Any] | None = None,
               *, requires_approval: bool = False) -> Tool:
        """A tool the client runs; the turn pauses as ``awaiting_client`` until its result arrives."""
        schema = input_schema or {"type": "object", "properties": {}}
        return cls(name=name, description=description, input_schema=schema, executor="client",
                   requires_approval=requires_approval)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated arguments, or ToolInputError (a ValueError) with a message the model can act on."""
        if self.args_model is None:
            return dict(args)  # a copy: the executor adds the ToolContext to it, never to the call's input
        try:
            return dict(self.args_model.model_validate(args))
        except ValidationError as exc:
            raise ToolInputError(_validation_message(self.name, exc)) from None


def _validation_message(name: str, exc: ValidationError) -> str:
    lines = [f"Invalid arguments for tool '{name}':"]
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(input)"
        lines.append(f"- {loc}: {err['msg']}")
    return "\n".join(lines)


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    lines = doc.splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _ARGS_HEADER.match(lines[i]):
        desc.append(lines[i])
        i += 1
    for line in lines[i + 1:]:
        m = _ARG_LINE.match(line)
        if m:
            params[m.group(1)] = m.group(2).strip()
        elif line.strip() and not line.startswith((" ", "\t")):
            break
    return "\n".join(desc).strip(), params


def make_tool(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
    timeout: float = DEFAULT_TIMEOUT, requires_approval: bool = False, executor: Executor = "server",
    sequential: bool = False, idempotent: bool = False,
) -> Tool:
    sig = inspect.signature(fn)
    doc_desc, param_docs = _parse_docstring(fn.__doc__)
    hints = inspect.get_annotations(fn, eval_str=True, locals={"ToolContext": ToolContext})
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, p in sig.parameters.items():
        if hints.get(pname) is ToolContext:
            context_param = pname
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise UsageError(f"tool {fn.__name__}: *args/**kwargs are not supported")
        ann = hints.get(pname, Any)
        default = ... if p.default is p.empty else p.default
        fields[pname] = (ann, Field(default, description=param_docs.get(pname)))
    model = create_model(
        f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    if timeout <= 0:
        raise UsageError(f"tool {fn.__name__}: timeout must be positive")
    return Tool(
        name=name or fn.__name__,
        description=description if description is not None else doc_desc,
        input_schema=schema,
        fn=fn,
        timeout=timeout,
        requires_approval=requires_approval,
        executor=executor,
        sequential=sequential,
        idempotent=idempotent,
        args_model=model,
        is_async=inspect.iscoroutinefunction(fn),
        context_param=context_param,
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout: float = DEFAULT_TIMEOUT,
    requires_approval: bool = False, executor: Executor = "server", sequential: bool = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
    timeout: float = DEFAULT_TIMEOUT, requires_approval: bool = False, executor: Executor = "server",
    sequential: bool = False, idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a ``Tool``: ``@tool`` or ``@tool(timeout=10, requires_approval=True)``.
    ``idempotent=True`` says a call may safely run twice (see ``Tool.idempotent``)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return make_tool(f, name=name, description=description, timeout=timeout,
                         requires_approval=requires_approval, executor=executor, sequential=sequential,
                         idempotent=idempotent)

    return wrap(fn) if fn is not None else wrap
