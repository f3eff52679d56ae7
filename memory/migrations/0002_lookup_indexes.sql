-- Two lookups the write and read paths make on every call, found slow by bench/search_latency.py:
-- facts carved from a candidate passage (retrieval), and every version of a chain (supersede
-- re-points head_id). The partial head index excluded the chain's own head, so re-pointing a
-- chain scanned the whole table.
CREATE INDEX facts_passage ON beads.facts (passage_id) WHERE passage_id IS NOT NULL;
DROP INDEX beads.facts_head;
CREATE INDEX facts_head ON beads.facts (head_id);
