-- 0006: sessions of several agents (docs/agents.md). agents is the session's agent
-- configuration as JSON text (NULL for a one-model session); current_agent the agent that
-- answers the next message, changed by a hand-off.
ALTER TABLE sessions ADD COLUMN agents TEXT;
ALTER TABLE sessions ADD COLUMN current_agent TEXT;
