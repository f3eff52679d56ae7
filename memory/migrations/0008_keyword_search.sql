-- Keyword search over claims and passages, for hybrid retrieval (memory.retrieval).
--
-- Nearest-neighbour search alone misses what a sentence model blurs: a rare name, a number, a
-- short claim whose vector says little ("25:50" cut from "I got my 5K down to 25:50"). Each claim
-- and each passage now carries its english tsvector, stored and kept current by Postgres itself
-- (a generated column: every writer, COPY included, gets it without a change), behind a GIN index.
-- Adding the columns rewrites both tables once, computing the value for the rows already there.
--
-- Only the first 200,000 characters are indexed: a tsvector is limited to 1 MB, which a tool
-- result of about half a million characters of distinct words would exceed, and a write must never
-- fail because its text is long.
ALTER TABLE beads.facts
    ADD COLUMN body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', left(body, 200000))) STORED;
ALTER TABLE beads.passages
    ADD COLUMN body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', left(body, 200000))) STORED;

CREATE INDEX facts_body_tsv ON beads.facts USING gin (body_tsv);
CREATE INDEX passages_body_tsv ON beads.passages USING gin (body_tsv);
