-- 0008: a call's result kept in the tool-effect ledger as soon as the call ends. A step's
-- results are stored as blocks in call order once every call of the step has ended; a call
-- that ended before a sibling did has its result here meanwhile, so that a process taking the
-- turn over after a crash uses it instead of running the call again or asking the user.
ALTER TABLE tool_calls ADD COLUMN result text;
