-- 0002: exact liveness of runners, and the tool-effect ledger.
--
-- runners.lock_key: the key of the session-level advisory lock each server process holds on a
-- connection of its own for as long as it lives (pg.py, LivenessLock). PostgreSQL releases it
-- the moment that connection ends, so another process sees at once, in pg_locks, that a
-- runner is gone: no timeout to wait for. heartbeat_at stays, as the sign of a process that is
-- alive but hung.
ALTER TABLE runners ADD COLUMN lock_key bigint;

-- tool_calls: the tool-effect ledger. A server tool's start is written before it runs (with
-- the idempotency key it receives, the same on every attempt), its end with its result (the
-- tool_result block's write updates the row). After a crash, a call that had started and
-- not ended may have had its effect: it runs again only if the tool is idempotent, else the
-- user is asked. attempts counts the starts.
CREATE TABLE tool_calls (
    turn_id          text NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    tool_use_id      text NOT NULL,
    tool             text NOT NULL,
    idempotency_key  text NOT NULL,
    state            text NOT NULL CHECK (state IN ('started', 'finished')),
    attempts         integer NOT NULL DEFAULT 1,
    started_at       double precision NOT NULL,
    ended_at         double precision,
    is_error         boolean,
    PRIMARY KEY (turn_id, tool_use_id)
);
