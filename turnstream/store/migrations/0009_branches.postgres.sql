-- 0009: turns form a tree (docs/branches.md). A turn names the turn it follows
-- (parent_turn_id, NULL for a session's first), and a session names the last turn of the
-- branch it shows (current_leaf), which a new turn follows unless told otherwise. Sessions
-- made before this are one branch: each turn follows the session's previous turn in creation
-- order, and the last turn is the current leaf.
ALTER TABLE turns ADD COLUMN parent_turn_id text;
ALTER TABLE sessions ADD COLUMN current_leaf text;
UPDATE turns SET parent_turn_id = p.prev
    FROM (SELECT id, lag(id) OVER (PARTITION BY session_id ORDER BY ord) AS prev FROM turns) p
    WHERE p.id = turns.id AND p.prev IS NOT NULL;
UPDATE sessions SET current_leaf = (SELECT t.id FROM turns t WHERE t.session_id = sessions.id
                                    ORDER BY t.ord DESC LIMIT 1);
