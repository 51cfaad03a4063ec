-- 0004: the audit trail of tool runs (the PostgreSQL twin, 0004_audit.postgres.sql, explains
-- both tables at more length): the decision taken on each call that needed approval, and the
-- tools a session always allows.
CREATE TABLE tool_decisions (
    turn_id      TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    tool_use_id  TEXT NOT NULL,
    tool         TEXT NOT NULL,
    approved     INTEGER NOT NULL,
    source       TEXT NOT NULL CHECK (source IN ('user', 'session_grant', 'approver')),
    decided_by   TEXT NOT NULL,
    decided_at   REAL NOT NULL,
    reason       TEXT,
    always       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (turn_id, tool_use_id)
);

CREATE TABLE tool_grants (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    granted_by  TEXT NOT NULL,
    granted_at  REAL NOT NULL,
    PRIMARY KEY (session_id, tool)
);
