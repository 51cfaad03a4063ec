-- 0005: budget counters. One row per scope (turn:<id>, session:<id>, user:<id>:<UTC date>)
-- with what it spent (tokens, nano-dollars) and what its user allowed beyond the ceiling.
-- No foreign keys: a user's daily total must outlive a deleted chat. Increments are single
-- UPDATE ... SET x = x + n statements, so processes sharing the database add up exactly.
CREATE TABLE budget_counters (
    scope             text PRIMARY KEY,
    tokens            bigint NOT NULL DEFAULT 0,
    nano_usd          bigint NOT NULL DEFAULT 0,
    granted_tokens    bigint NOT NULL DEFAULT 0,
    granted_nano_usd  bigint NOT NULL DEFAULT 0,
    updated_at        double precision NOT NULL
);
-- Which steps were charged, so a step is counted once even when a turn is taken over.
CREATE TABLE budget_charges (
    turn_id   text NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    step      integer NOT NULL,
    tokens    bigint NOT NULL,
    nano_usd  bigint NOT NULL,
    PRIMARY KEY (turn_id, step)
);
