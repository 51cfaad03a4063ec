-- 0005: budget counters. One row per scope (turn:<id>, session:<id>, user:<id>:<UTC date>)
-- with what it spent (tokens, nano-dollars) and what its user allowed beyond the ceiling.
-- No foreign keys: a user's daily total must outlive a deleted chat. Increments are single
-- UPDATE ... SET x = x + n statements, so processes sharing the database add up exactly.
CREATE TABLE budget_counters (
    scope             TEXT PRIMARY KEY,
    tokens            INTEGER NOT NULL DEFAULT 0,
    nano_usd          INTEGER NOT NULL DEFAULT 0,
    granted_tokens    INTEGER NOT NULL DEFAULT 0,
    granted_nano_usd  INTEGER NOT NULL DEFAULT 0,
    updated_at        REAL NOT NULL
);
-- Which steps were charged, so a step is counted once even when a turn is taken over.
CREATE TABLE budget_charges (
    turn_id   TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    step      INTEGER NOT NULL,
    tokens    INTEGER NOT NULL,
    nano_usd  INTEGER NOT NULL,
    PRIMARY KEY (turn_id, step)
);
