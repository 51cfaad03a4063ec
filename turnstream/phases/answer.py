"""Whether a speaker with an ``output`` model gave a valid final answer (docs/structured-output.md).

An invalid answer gets one repair round: the model is told what was wrong and asked again
(``output.Repair``, which the step reads when it builds the request). A second invalid
answer ends the turn ``failed``; that decision is the conductor's.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..agents import Persona
from ..blocks import Block, ToolResultBlock, ToolUseBlock
from ..output import NO_ANSWER_CALL, OUTPUT_TOOL, Repair, answer_text, problem


class AnswerCheck:
    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self.repair = Repair()
        self._bad_answers = 0
        """Calls of the answer tool (``output_via="tool"``) whose answer was not valid."""

    def after_calls(self, speaker: Persona, blocks: Sequence[Block], step: int,
                    calls: Sequence[ToolUseBlock]) -> str | None:
        """After a step's calls ran, for a speaker answering through the answer tool: "" when
        one of them gave a valid answer (the turn is over), the error when a second answer was
        invalid (the first one's ``is_error`` result was its repair round), else None."""
        if speaker.output is None or speaker.output_via != "tool":
            return None
        results = {b.tool_use_id: b for b in blocks if isinstance(b, ToolResultBlock) and b.step == step}
        for c in calls:
            result = results.get(c.tool_use_id)
            if c.name != OUTPUT_TOOL or result is None:
                continue
            if not result.is_error:
                return ""
            self._bad_answers += 1
            if self._bad_answers > 1:
                return result.content
        return None

    def after_text(self, speaker: Persona, blocks: Sequence[Block], step: int) -> str | None:
        """For a speaker with an ``output`` model, after a final answer: None when it is
        valid (or none is asked for), "" when the repair round starts, else the error. An
        answer tool's speaker that answered in text instead is held to the same rule (a text
        that is a valid document is taken as the answer)."""
        model = speaker.output
        if model is None:
            return None
        error = problem(model, answer_text(blocks, step))
        if error is None:
            return None
        if speaker.output_via == "tool":
            error = NO_ANSWER_CALL
        if self.repair.used or step >= self.max_steps:
            return error
        self.repair.ask(step, model, error, via=speaker.output_via)
        return ""


__all__ = ["AnswerCheck"]
