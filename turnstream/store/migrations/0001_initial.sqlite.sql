-- 0001 initial schema, SQLite dialect (the PostgreSQL twin, 0001_initial.postgres.sql,
-- explains each table at more length; the tables and columns are the same).
--
-- JSON is stored as TEXT exactly as written. Times are Unix seconds (REAL). Creation order
-- of sessions and turns is the implicit rowid. blocks and turn_events stay rowid tables
-- (not WITHOUT ROWID) because their rows can be large: a tool result may hold 100 kB.

-- users: who may call the API; only the SHA-256 of each API key is kept.
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    created_at  REAL NOT NULL
);

-- sessions: one conversation of one user; unit of access control and of "one open turn".
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    title       TEXT NOT NULL DEFAULT '',
    model       TEXT NOT NULL DEFAULT '',
    toolset     TEXT,
    created_at  REAL NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_id);

-- turns: one user message and everything until control returns to the user, plus the
-- per-turn counters (next_seq, last_n) every write checks, and the runner running it.
CREATE TABLE turns (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    input         TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN
                      ('running', 'awaiting_client', 'complete', 'failed', 'cancelled', 'interrupted')),
    stop_reason   TEXT,
    usage         TEXT NOT NULL DEFAULT '{}',
    steps         INTEGER NOT NULL DEFAULT 0,
    model         TEXT NOT NULL DEFAULT '',
    error         TEXT,
    client_tools  TEXT NOT NULL DEFAULT '[]',
    created_at    REAL NOT NULL,
    next_seq      INTEGER NOT NULL DEFAULT 0,
    last_n        INTEGER NOT NULL DEFAULT 0,
    runner_id     TEXT
);
CREATE INDEX turns_by_session ON turns (session_id);
-- At most one open turn per session, enforced by the database (several processes may
-- share one SQLite file).
CREATE UNIQUE INDEX turns_one_open_per_session ON turns (session_id)
    WHERE status IN ('running', 'awaiting_client');
CREATE INDEX turns_running ON turns (runner_id) WHERE status = 'running';

-- blocks: the content of a turn, one row per finished block, gapless seq order; content is
-- the whole block (source of truth), block_type and text_content are copies for searching.
CREATE TABLE blocks (
    turn_id       TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    step          INTEGER NOT NULL,
    block_type    TEXT NOT NULL,
    text_content  TEXT,
    content       TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);

-- turn_events: the replayable non-delta events of a turn, for Last-Event-ID resumption.
CREATE TABLE turn_events (
    turn_id    TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    n          INTEGER NOT NULL,
    name       TEXT NOT NULL,
    data       TEXT NOT NULL,
    block_seq  INTEGER,
    PRIMARY KEY (turn_id, n)
);

-- runners: live processes sharing this file and their heartbeats, for recover().
CREATE TABLE runners (
    id            TEXT PRIMARY KEY,
    heartbeat_at  REAL NOT NULL
);

-- notebooks: the live notebook of a session as one JSON document, versioned per save.
CREATE TABLE notebooks (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    doc         TEXT NOT NULL,
    version     INTEGER NOT NULL,
    updated_at  REAL NOT NULL
);
