-- Capture writes vectors unindexed; a background indexer adds them to HNSW afterwards.
--
-- Inserting one 768-d vector into a 100k-row HNSW graph costs ~2 ms here, and a message of three
-- claims writes four vectors: most of a capture's time, paid inside the agent's turn. Now a new
-- vector row carries indexed = false, which keeps it out of the partial HNSW indexes; search reads
-- such rows exactly (they are few: the indexer flips them to true within moments of the write,
-- outside any turn, see memory.indexer), so a fact is findable the moment its capture commits.
ALTER TABLE beads.fact_vectors ADD COLUMN indexed boolean NOT NULL DEFAULT true;
ALTER TABLE beads.fact_vectors ALTER COLUMN indexed SET DEFAULT false;
ALTER TABLE beads.passage_vectors ADD COLUMN indexed boolean NOT NULL DEFAULT true;
ALTER TABLE beads.passage_vectors ALTER COLUMN indexed SET DEFAULT false;

CREATE INDEX fact_vectors_pending ON beads.fact_vectors (embedder_id) WHERE NOT indexed;
CREATE INDEX passage_vectors_pending ON beads.passage_vectors (embedder_id) WHERE NOT indexed;

-- Each embedding space's HNSW indexes now cover only indexed rows (memory.vectors creates them so
-- for spaces registered later).
DO $$
DECLARE
    space record;
    tbl text;
BEGIN
    FOR space IN SELECT id, dims FROM beads.embedders LOOP
        FOREACH tbl IN ARRAY ARRAY['fact_vectors', 'passage_vectors'] LOOP
            EXECUTE format('DROP INDEX IF EXISTS beads.%I', tbl || '_hnsw_' || space.id);
            EXECUTE format(
                'CREATE INDEX %I ON beads.%I USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
                'WHERE embedder_id = %s AND indexed',
                tbl || '_hnsw_' || space.id, tbl, space.dims, space.id);
        END LOOP;
    END LOOP;
END
$$;
