-- 0002: exact liveness of runners, and the tool-effect ledger (the PostgreSQL twin,
-- 0002_liveness_and_tool_calls.postgres.sql, explains both at more length).
--
-- SQLite has no session locks: each process holds an exclusive lock on a file of its own
-- beside the database (<db>.runners/<runner id>.lock), which the operating system releases
-- when the process dies. runners.lock_key is unused here.
ALTER TABLE runners ADD COLUMN lock_key INTEGER;

CREATE TABLE tool_calls (
    turn_id          TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    tool_use_id      TEXT NOT NULL,
    tool             TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('started', 'finished')),
    attempts         INTEGER NOT NULL DEFAULT 1,
    started_at       REAL NOT NULL,
    ended_at         REAL,
    is_error         INTEGER,
    PRIMARY KEY (turn_id, tool_use_id)
);
