"""The audit trail of a session's tool calls, as the export shows it (``GET
/api/sessions/{id}/audit``, ``turnstream audit``).

Everything comes from what the store keeps: the calls and results (blocks), when each
server tool ran (the tool-effect ledger, ``tool_calls``), who approved or denied a call,
when and why (``tool_decisions``), and the tools the session always allows
(``tool_grants``). One entry per tool call, in the order the calls were made.

Before it leaves the process, every string of the export passes through a ``Redactor``:
provider and turnstream API keys (by their shapes, and the values of ``ANTHROPIC_API_KEY``
and ``OPENAI_API_KEY`` when set) and the extra patterns of ``TURNSTREAM_AUDIT_REDACT``
become ``[redacted]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .blocks import ToolResultBlock, ToolUseBlock
from .store.protocol import Store

REDACTED = "[redacted]"

KEY_PATTERNS: tuple[str, ...] = (
    r"sk-ant-[A-Za-z0-9_\-]{8,}",  # Anthropic
    r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{16,}",  # OpenAI
    r"\bts_[A-Za-z0-9_\-]{16,}",  # turnstream's own API keys
)
KEY_VARIABLES: tuple[str, ...] = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


class Redactor:
    """Replaces every match of the key shapes, the configured key values and ``patterns``."""

    def __init__(self, patterns: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        secrets = [re.escape(v) for k in KEY_VARIABLES if len(v := env.get(k, "").strip()) >= 8]
        self._pattern = re.compile("|".join(f"(?:{p})" for p in (*secrets, *KEY_PATTERNS, *patterns)))

    def text(self, value: str) -> str:
        return self._pattern.sub(REDACTED, value)

    def value(self, value: Any) -> Any:
        """``value`` with every string in it (keys of objects too) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


async def session_audit(store: Store, session_id: str) -> dict[str, Any]:
    """The session's audit trail, unredacted: ``grants`` and one ``tool_runs`` entry per call.
    ``KeyError`` (``NotFound``) for an unknown session is the caller's to raise first."""
    runs: list[dict[str, Any]] = []
    for turn in await store.list_turns(session_id):
        ledger = {r.tool_use_id: r for r in await store.tool_calls(turn.id)}
        decisions = {d.tool_use_id: d for d in await store.tool_decisions(turn.id)}
        results = {b.tool_use_id: b for b in turn.blocks if isinstance(b, ToolResultBlock)}
        for call in (b for b in turn.blocks if isinstance(b, ToolUseBlock)):
            run = ledger.get(call.tool_use_id)
            decision = decisions.get(call.tool_use_id)
            result = results.get(call.tool_use_id)
            runs.append({
                "turn_id": turn.id,
                "step": call.step,
                "tool_use_id": call.tool_use_id,
                "tool": call.name,
                "input": call.input,
                "decision": None if decision is None else {
                    "approved": decision.approved, "source": decision.source, "by": decision.decided_by,
                    "at": decision.decided_at, "reason": decision.reason, "always": decision.always},
                "started_at": None if run is None else run.started_at,
                "ended_at": None if run is None else run.ended_at,
                "duration_s": None if run is None else run.duration,
                "attempts": 0 if run is None else run.attempts,
                "is_error": None if result is None else result.is_error,
                "result": None if result is None else result.content,
            })
    grants = [{"tool": g.tool, "by": g.granted_by, "at": g.granted_at} for g in await store.tool_grants(session_id)]
    return {"session_id": session_id, "grants": grants, "tool_runs": runs}


def jsonl_records(audit: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The export as JSON Lines records: each grant, then each tool run, with a ``type``."""
    sid = audit["session_id"]
    for g in audit["grants"]:
        yield {"type": "grant", "session_id": sid, **g}
    for r in audit["tool_runs"]:
        yield {"type": "tool_run", "session_id": sid, **r}


__all__ = ["KEY_PATTERNS", "REDACTED", "Redactor", "jsonl_records", "session_audit"]
