-- 0001 initial schema, PostgreSQL dialect (the SQLite twin is 0001_initial.sqlite.sql).
--
-- JSON columns use `json`, not `jsonb`: nothing queries inside them, `json` keeps the text
-- exactly as written (cheaper to insert, and it accepts the \u0000 escape that jsonb rejects,
-- which a model's text may contain). Times are Unix seconds as double precision, the unit of
-- the pydantic models.

-- users: who may call the API. Only the SHA-256 of each API key is kept (keys.py), so a copy
-- of the database does not hand out working keys; the key itself is shown once at creation.
CREATE TABLE users (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    key_hash    text NOT NULL UNIQUE,
    created_at  double precision NOT NULL
);

-- sessions: one conversation of one user. It is the unit of access control (another user's
-- session is a 404) and of the rule "one open turn at a time". user_id has no foreign key on
-- purpose: the library may keep sessions for a local user that was never registered.
CREATE TABLE sessions (
    id          text PRIMARY KEY,
    ord         bigint GENERATED ALWAYS AS IDENTITY,  -- creation order; created_at may tie
    user_id     text NOT NULL,
    title       text NOT NULL DEFAULT '',
    model       text NOT NULL DEFAULT '',
    toolset     text,
    created_at  double precision NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_id, ord);

-- turns: one user message and everything until control returns to the user. Besides the
-- outcome (status, stop_reason, usage, steps, error) it holds the bookkeeping that makes
-- concurrent writers safe: next_seq and last_n are the per-turn counters that every block
-- and event write checks and advances under this row's lock, and runner_id names the process
-- running the turn so that recovery only interrupts turns whose process is gone.
CREATE TABLE turns (
    id            text PRIMARY KEY,
    ord           bigint GENERATED ALWAYS AS IDENTITY,
    session_id    text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    input         text NOT NULL,
    status        text NOT NULL CHECK (status IN
                      ('running', 'awaiting_client', 'complete', 'failed', 'cancelled', 'interrupted')),
    stop_reason   text,
    usage         json NOT NULL DEFAULT '{}',
    steps         integer NOT NULL DEFAULT 0,
    model         text NOT NULL DEFAULT '',
    error         text,
    client_tools  json NOT NULL DEFAULT '[]',
    created_at    double precision NOT NULL,
    next_seq      integer NOT NULL DEFAULT 0,   -- the seq the next block must carry
    last_n        bigint NOT NULL DEFAULT 0,    -- highest event n ever stored; never lowered
    runner_id     text                          -- the process that set it running
);
CREATE INDEX turns_by_session ON turns (session_id, ord);
-- At most one open turn per session, enforced by the database so that two processes
-- starting a turn in the same session at the same moment cannot both succeed.
CREATE UNIQUE INDEX turns_one_open_per_session ON turns (session_id)
    WHERE status IN ('running', 'awaiting_client');
CREATE INDEX turns_running ON turns (runner_id) WHERE status = 'running';

-- blocks: the content of a turn, one row per finished block, in seq order without gaps.
-- content is the whole block as BLOCK_ADAPTER serialises it (the source of truth);
-- block_type and text_content are copies for listing and searching without parsing JSON.
CREATE TABLE blocks (
    turn_id       text NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    seq           integer NOT NULL,
    step          integer NOT NULL,
    block_type    text NOT NULL,
    text_content  text,
    content       json NOT NULL,
    PRIMARY KEY (turn_id, seq)
);

-- turn_events: the non-delta events of a turn (turn_start, step_start, block_stop,
-- tool_request, step_restart, turn_complete, error), kept so that a client reconnecting
-- with Last-Event-ID, on any server process, replays what it missed. n rises within a turn;
-- block_seq ties a block_stop event to its block so a restarted step removes both.
CREATE TABLE turn_events (
    turn_id    text NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    n          bigint NOT NULL,
    name       text NOT NULL,
    data       json NOT NULL,
    block_seq  integer,
    PRIMARY KEY (turn_id, n)
);

-- runners: the live server processes sharing this database, with their last heartbeat.
-- A turn left running by a runner that stopped beating (or closed) is interrupted by
-- recover() in any other process; turns of live runners are left alone.
CREATE TABLE runners (
    id            text PRIMARY KEY,
    heartbeat_at  double precision NOT NULL
);

-- notebooks: the live notebook of a session (cells, code, outputs) as one JSON document.
-- version rises by one per save, so that a tab can tell which copy is newer.
CREATE TABLE notebooks (
    session_id  text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    doc         json NOT NULL,
    version     integer NOT NULL,
    updated_at  double precision NOT NULL
);
