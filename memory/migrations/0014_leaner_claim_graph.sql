-- Claim vectors' HNSW indexes are rebuilt with m = 12 (pgvector's default is 16).
--
-- An insert into the graph re-prunes the neighbour lists (2m entries at the base layer) of the
-- vectors it links to, so its cost grows faster than m. A message writes about three claim vectors,
-- and these inserts were half of the database's work on an import (results/long-sessions-32). On a
-- 500K tier's real claim vectors, m = 12 makes an insert 30% cheaper and the session-filtered walk
-- returns 99.1% of each question's 32 nearest claims against 99.4% (bench.graph_settings,
-- results/long-sessions-39). memory.postgres.vectors creates the indexes of spaces registered later
-- with the same settings (HNSW_M, HNSW_EF_CONSTRUCTION).
--
-- pgvector reads m from an index's own pages, not from its options, so the indexes are built again.
-- Only rows already marked indexed are in them; pending rows stay pending for the background indexer.
DO $$
DECLARE
    space record;
BEGIN
    FOR space IN SELECT id, dims FROM beads.embedders LOOP
        EXECUTE format('DROP INDEX IF EXISTS beads.%I', 'fact_vectors_hnsw_' || space.id);
        EXECUTE format(
            'CREATE INDEX %I ON beads.fact_vectors USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
            'WITH (m = 12, ef_construction = 64) WHERE embedder_id = %s AND indexed',
            'fact_vectors_hnsw_' || space.id, space.dims, space.id);
    END LOOP;
END
$$;
