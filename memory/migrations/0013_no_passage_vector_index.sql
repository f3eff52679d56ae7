-- Passage vectors leave the HNSW indexes: nothing searches them by nearness.
--
-- A passage's vector is read by its primary key only, to score a claim found by its own vector or by
-- keyword (memory.retrieval.statement); the nearest-passages scan that used these indexes was removed
-- (docs/benchmarks.md, "One nearest-neighbour scan instead of two"). Each passage vector the
-- background indexer moved in still cost an HNSW insert, as much as a claim's: a quarter of the
-- indexer's work on a chat (409 of 1,647 vectors on LoCoMo's conv-26), taken from the same cores as
-- the writes. The indexer still marks passage rows indexed; no index reads the mark.
DO $$
DECLARE
    space record;
BEGIN
    FOR space IN SELECT id FROM beads.embedders LOOP
        EXECUTE format('DROP INDEX IF EXISTS beads.%I', 'passage_vectors_hnsw_' || space.id);
    END LOOP;
END
$$;
