-- When each fact last reached a model: what background consolidation reads to expire facts nobody uses.
--
-- A table of its own rather than columns on beads.facts: recording an injection touches only this
-- row, so it never takes the fact row's lock (which supersede and compaction hold FOR UPDATE) and
-- never rewrites a wide fact row on every model call. A fact never retrieved simply has no row.
CREATE TABLE beads.retrievals (
    fact_id             uuid PRIMARY KEY REFERENCES beads.facts (id) ON DELETE CASCADE,
    first_retrieved_at  timestamptz NOT NULL DEFAULT now(),
    last_retrieved_at   timestamptz NOT NULL DEFAULT now(),
    times               integer NOT NULL DEFAULT 1 CHECK (times >= 1),
    CHECK (last_retrieved_at >= first_retrieved_at)
);
