-- 0007: images and files of messages, stored once by content hash (every turn, session and
-- tool result that holds the same bytes refers to the one row), and the messages a user sent
-- while a turn of the session ran, kept here so that the process running the turn sees them
-- wherever they arrived; the runner takes them (deletes them) at its next step.
CREATE TABLE blobs (
    sha256      text PRIMARY KEY,
    media_type  text NOT NULL,
    size        bigint NOT NULL,
    data        bytea NOT NULL,
    created_at  double precision NOT NULL
);

CREATE TABLE queued_messages (
    id           bigserial PRIMARY KEY,
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    text         text NOT NULL,
    attachments  json NOT NULL,
    created_at   double precision NOT NULL
);
CREATE INDEX queued_messages_by_session ON queued_messages (session_id, id);
