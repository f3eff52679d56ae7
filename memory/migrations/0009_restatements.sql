-- Echoes and proposals.
--
-- `restates`: a fact that says again what a user's claim said (the agent's summary of it, a
-- sub-agent's conclusion, the user's own second mention, a question that names its value) points at
-- that claim. It is not independent evidence: when the claim is replaced, its restatements are
-- retired with it (memory.facts.supersede), and `cascade_of` on the supersedes edge that retired one
-- names the claim whose replacement did it, so undoing that replacement brings them back.
--
-- `may_supersede`: an automatic edge a rule proposes instead of writing (a rule measured below the
-- precision capture may act on alone); a person accepts it (a real supersedes edge is written) or
-- dismisses it. `settled` says which, `settled_at` when.
--
-- `delegation`: the task a delegating agent gave a sub-agent, captured in the sub-agent's memory. It
-- is the agent's words, not the user's: never recalled as the user's question or claim.
ALTER TABLE beads.edges DROP CONSTRAINT edges_relation_check;
ALTER TABLE beads.edges ADD CONSTRAINT edges_relation_check
    CHECK (relation IN ('supersedes', 'rollup_of', 'contradicts', 'relates_to', 'derived_from',
                        'restates', 'may_supersede'));
ALTER TABLE beads.edges
    ADD COLUMN cascade_of uuid REFERENCES beads.facts (id) ON DELETE CASCADE,
    ADD COLUMN settled text CHECK (settled IN ('accepted', 'dismissed')),
    ADD COLUMN settled_at timestamptz,
    ADD CHECK ((settled IS NULL) = (settled_at IS NULL)),
    ADD CHECK (settled IS NULL OR relation = 'may_supersede');
-- what undoing a replacement looks up: the edges it cascaded
CREATE INDEX edges_cascade_of ON beads.edges (cascade_of) WHERE cascade_of IS NOT NULL;
-- the proposals waiting for a person, per session
CREATE INDEX edges_open_proposals ON beads.edges (session_id)
    WHERE relation = 'may_supersede' AND settled IS NULL;

ALTER TABLE beads.facts DROP CONSTRAINT facts_source_check;
ALTER TABLE beads.facts ADD CONSTRAINT facts_source_check
    CHECK (source IN ('passive_capture', 'remember_tool', 'tool_result', 'conclude_task',
                      'fallback_conclude', 'compaction', 'delegation'));
