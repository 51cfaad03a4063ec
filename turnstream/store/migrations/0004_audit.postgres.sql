-- 0004: the audit trail of tool runs.
--
-- tool_calls (0002) already holds when each server tool call started and ended. What it lacks
-- is the decision taken before a call that needs approval: who decided, when, and why. A
-- denied call never starts, so it has no tool_calls row; the decision gets a table of its own,
-- keyed like tool_calls so the two join on (turn_id, tool_use_id).
--
-- tool_decisions.source: user (answered through the API, the web chat or the terminal),
-- session_grant (no one was asked: the tool was always allowed in the session, see below) or
-- approver (the library's approver callback). always: this approval also granted the tool for
-- the rest of the session.
CREATE TABLE tool_decisions (
    turn_id      text NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    tool_use_id  text NOT NULL,
    tool         text NOT NULL,
    approved     boolean NOT NULL,
    source       text NOT NULL CHECK (source IN ('user', 'session_grant', 'approver')),
    decided_by   text NOT NULL,
    decided_at   double precision NOT NULL,
    reason       text,
    always       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (turn_id, tool_use_id)
);

-- tool_grants: "always allow this tool in this session". Later calls of the tool in the
-- session run without asking (a call that may already have run before a crash is still asked).
CREATE TABLE tool_grants (
    session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool        text NOT NULL,
    granted_by  text NOT NULL,
    granted_at  double precision NOT NULL,
    PRIMARY KEY (session_id, tool)
);
