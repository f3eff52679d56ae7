-- Keep vectors in their table rows instead of the TOAST table.
--
-- pgvector declares its type STORAGE external, so any row over about 2 kB moves the vector out of
-- line; a 768-d vector is 3 kB. Ranking reads the vectors of ~170 candidates per search, and each
-- out-of-line read is a TOAST index lookup plus two chunk fetches: about a fifth of a search at 100k
-- facts (bench/search_latency.py). With the target at its maximum, a row that fits a page stays
-- inline; vectors too large for a page (over ~2,000 dimensions) are still moved out, so nothing fails.
ALTER TABLE beads.fact_vectors SET (toast_tuple_target = 8160);
ALTER TABLE beads.passage_vectors SET (toast_tuple_target = 8160);

-- Rows written before this migration keep their out-of-line values until rewritten. The round trip
-- through real[] makes a fresh value, which the toaster now leaves inline.
UPDATE beads.fact_vectors SET embedding = embedding::real[]::vector;
UPDATE beads.passage_vectors SET embedding = embedding::real[]::vector;
