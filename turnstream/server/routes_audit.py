"""The audit trail of a session's tool calls (``audit.py``), redacted, as JSON."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from starlette.responses import JSONResponse, Response

from ..audit import Redactor, session_audit
from .api import API, Call, Reply
from .auth import owned_session


class AuditDecision(BaseModel):
    approved: bool
    source: Literal["user", "session_grant", "approver"] = Field(
        description="user: answered by a user; session_grant: the tool is always allowed in this session "
                    "(by is who allowed it); approver: the library's approver callback.")
    by: str
    at: float = Field(description="Unix time of the decision.")
    reason: str | None
    always: bool = Field(description="This approval also allowed the tool for the rest of the session.")


class AuditRun(BaseModel):
    turn_id: str
    step: int
    tool_use_id: str
    tool: str
    input: dict[str, Any]
    decision: AuditDecision | None = Field(description="None when the call needed no approval.")
    started_at: float | None = Field(description="When the server tool last started (None if it never ran here).")
    ended_at: float | None
    duration_s: float | None
    attempts: int = Field(description="How often it started (more than 1 after a restart).")
    is_error: bool | None
    result: str | None


class AuditGrant(BaseModel):
    tool: str
    by: str
    at: float


class AuditOut(BaseModel):
    session_id: str
    grants: list[AuditGrant] = Field(description="The tools this session always allows.")
    tool_runs: list[AuditRun] = Field(description="Every tool call, in the order it was made.")


@API.route("GET", "/api/sessions/{session_id}/audit",
           summary="The audit trail of the session's tool calls (times, approvals, reasons; secrets redacted)",
           replies={200: Reply("The session's tool calls.", AuditOut)})
async def get_audit(call: Call) -> Response:
    state = call.state
    session = await owned_session(state.store, call.user, call.param("session_id"))
    audit = await session_audit(state.store, session.id)
    return JSONResponse(Redactor(state.settings.audit_redact).value(audit))
