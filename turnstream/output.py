"""Structured answers (docs/structured-output.md): ``Agent(output=SomeModel)``.

The model is asked for one JSON document through its API's own option (``OutputFormat``,
sent by each adapter: Anthropic ``output_config.format``, Chat Completions
``response_format``, Responses ``text.format``). While the answer streams, each text delta
carries the best-effort parse of the text so far (``PartialOutputs``, on the linear parser of
``partial_json.py``). The final answer is validated against the pydantic model; the first
failure goes back to the model as a user message naming the error (``Repair``), a second
fails the turn with it.

With ``output_via="tool"`` the answer is the input of a tool call instead (``output_tool``), for
a server with no structured-output option and for shapes an API's option cannot take: the
partial objects are the call's streamed input, a failure is the call's ``is_error`` result, and
the turn ends once the call has a result that is not one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .assemble import _SNAPSHOT_EVERY_FRAGMENT_BELOW, _SNAPSHOT_GROWTH
from .blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from .events import BlockDelta, BlockStart
from .partial_json import PartialJSON
from .providers.base import Message, OutputFormat
from .tools.tool import Tool
from .transcript import repair, turn_messages

REPAIR = ("Your answer is not a valid {name}: {error}\n"
          "Answer again with only the JSON document, matching the schema.")
OutputVia = Literal["native", "tool"]
"""How a structured answer is asked for: the API's own option, or a tool the model calls."""
OUTPUT_TOOL = "final_answer"
RECORDED = "Answer recorded. The turn is over."
NO_ANSWER_CALL = f"the answer must be given by calling the {OUTPUT_TOOL} tool with it"
REPAIR_TOOL = ("Your answer is not a valid {name}: {error}. "
               "Call the " + OUTPUT_TOOL + " tool with the answer as its input.")


def output_tool(model: type[BaseModel]) -> Tool:
    """The tool a model answers through when ``output_via="tool"``: its input is the answer,
    validated as ``model`` (an invalid one gets the validation errors as its ``is_error``
    result, which the model can act on). For servers without a structured-output option, and
    for shapes an API's option cannot take (free-key mappings, recursion)."""
    schema = model.model_json_schema()
    schema.pop("title", None)

    def record(**_: Any) -> str:
        return RECORDED

    return Tool(name=OUTPUT_TOOL, input_schema=schema, fn=record, args_model=model, idempotent=True,
                description=f"Give your final answer, a {output_format(model).name}, by calling this tool with it. "
                            "Call it once, when you are done, and write nothing after it.")


def answer_call(blocks: Sequence[Block]) -> ToolUseBlock | None:
    """The last call of ``OUTPUT_TOOL`` in ``blocks`` whose result is not an error."""
    failed = {b.tool_use_id for b in blocks if isinstance(b, ToolResultBlock) and b.is_error}
    calls = [b for b in blocks if isinstance(b, ToolUseBlock) and b.name == OUTPUT_TOOL
             and b.tool_use_id not in failed]
    return calls[-1] if calls else None


def output_format(model: type[BaseModel]) -> OutputFormat:
    """The request option for ``model``: its JSON Schema under a name the APIs accept."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", model.__name__)[:64] or "output"
    return OutputFormat(name=name, schema=model.model_json_schema())


def answer_text(blocks: Iterable[Block], step: int) -> str:
    """The text of one step: the answer to validate."""
    return "".join(b.text for b in blocks if isinstance(b, TextBlock) and b.step == step)


def problem(model: type[BaseModel], text: str) -> str | None:
    """Why ``text`` is not a valid ``model`` (pydantic's message), or None when it is."""
    try:
        model.model_validate_json(text)
    except ValidationError as exc:
        return "; ".join((".".join(map(str, e["loc"])) + ": " if e["loc"] else "") + e["msg"]
                         for e in exc.errors(include_url=False))
    return None


def parse(model: type[BaseModel], blocks: Sequence[Block], text: str) -> BaseModel:
    """The turn's answer as ``model`` (``pydantic.ValidationError`` when it is not one): the
    input of its ``OUTPUT_TOOL`` call when it answered through the tool, else its text."""
    call = answer_call(blocks)
    if call is not None:
        return model.model_validate(call.input)
    return model.model_validate_json(text)


class PartialOutputs:
    """Adds the best-effort parse of the answer so far to the text deltas of one step."""

    def __init__(self) -> None:
        self._open: dict[int, tuple[PartialJSON, list[int]]] = {}

    def see(self, ev: BlockStart | BlockDelta) -> None:
        if isinstance(ev, BlockStart):
            if ev.type == "text":
                self._open[ev.index] = (PartialJSON(), [0])
            return
        got = self._open.get(ev.index)
        if got is None or not ev.text:
            return
        pj, next_at = got
        pj.feed(ev.text)
        size = len(pj)
        if size < _SNAPSHOT_EVERY_FRAGMENT_BELOW or size >= next_at[0]:
            ev.output = pj.snapshot()
            next_at[0] = int(size * _SNAPSHOT_GROWTH)


class Repair:
    """The one repair round of a turn: the error told to the model after the failed answer."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.message = ""

    @property
    def used(self) -> bool:
        return self.step is not None

    def ask(self, step: int, model: type[BaseModel], error: str, *, via: OutputVia = "native") -> None:
        self.step = step
        self.message = (REPAIR if via == "native" else REPAIR_TOOL).format(name=output_format(model).name,
                                                                           error=error)

    def build(self, history: Sequence[tuple[str, Sequence[Block]]], origin: str) -> list[Message]:
        """The transcript with the repair message right after the failed answer's step."""
        raw: list[Message] = []
        for user_input, blocks in history[:-1]:
            raw.extend(turn_messages(user_input, blocks))
        user_input, blocks = history[-1]
        raw.extend(turn_messages(user_input, [b for b in blocks if self.step is None or b.step <= self.step]))
        raw.append(Message("user", [self.message]))
        later = [b for b in blocks if self.step is not None and b.step > self.step]
        raw.extend(turn_messages("", later))
        return repair(raw, origin)[0]
