-- Pinned facts: standing rules and profile facts that enter every prompt under their own budget.
--
-- A pin names the version that was pinned; readers resolve it through facts.head_id, so when the
-- pinned claim is superseded the new version is what the prompt shows (a pin is edited in place by
-- supersession, with no trigger and no second write in supersede). A table of its own, like
-- retrievals: pinning never rewrites or locks the fact row, and forgetting a fact drops its pin.
CREATE TABLE beads.pins (
    fact_id     uuid PRIMARY KEY REFERENCES beads.facts (id) ON DELETE CASCADE,
    session_id  text NOT NULL,
    -- 'user' when pinned from the inspector, else the agent id that called pin_fact
    pinned_by   text NOT NULL,
    pinned_at   timestamptz NOT NULL DEFAULT now()
);
-- the prompt lists a session's pins oldest first: the first pinned are the last truncated
CREATE INDEX pins_session ON beads.pins (session_id, pinned_at);
