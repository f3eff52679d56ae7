-- LangGraph store items (memory.langgraph_store.BeadsStore) read and written in SQL.
--
-- An item is a fact whose metadata carries `store_item` (its namespace, key and value). Until now
-- every get, search and listing loaded each version of every item under the prefix into Python and
-- cut to the limit there; these indexes let one statement find an item by key, or a page of current
-- items newest first, with the LIMIT in the query.
CREATE INDEX facts_store_items ON beads.facts (session_id, (metadata->'store_item'->>'key'))
    WHERE metadata ? 'store_item';
CREATE INDEX facts_store_current ON beads.facts (session_id, recorded_at DESC)
    WHERE metadata ? 'store_item' AND status = 'active';

-- Time to live, as LangGraph's stores have it: an item expires `ttl_minutes` after its last write
-- (or read, where reads refresh it). Nullable and without a default, so adding them rewrites
-- nothing; an expired fact is archived by memory.consolidate.expire_due, like consolidation's own
-- expiry, never deleted.
ALTER TABLE beads.facts
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN ttl_minutes double precision CHECK (ttl_minutes IS NULL OR ttl_minutes > 0);
CREATE INDEX facts_expiring ON beads.facts (expires_at) WHERE expires_at IS NOT NULL AND status = 'active';

-- One vector per text an item is indexed by. LangGraph embeds each indexed field of a value on its
-- own (`fields=["title", "body"]` is two vectors) and scores an item by its best one, so a query
-- equal to one field scores 1.0 whatever the others say; the fact's single claim vector (the texts
-- joined) cannot. Vectors live in their table rows, as in 0005.
CREATE TABLE beads.item_vectors (
    fact_id      uuid NOT NULL REFERENCES beads.facts (id) ON DELETE CASCADE,
    embedder_id  smallint NOT NULL REFERENCES beads.embedders (id) ON DELETE CASCADE,
    ord          smallint NOT NULL,
    embedding    vector NOT NULL,
    PRIMARY KEY (fact_id, embedder_id, ord)
) WITH (toast_tuple_target = 8160);

-- LangGraph's PostgresStore keeps its items in a table `store` (prefix, key, value, created_at,
-- updated_at, expires_at, ttl_minutes). The same shape as a view of the current items, so SQL written
-- against that table reads ours with `SET search_path = beads`. Postgres can update it in place:
-- `updated_at`, `expires_at` and `ttl_minutes` are plain columns of beads.facts.
CREATE VIEW beads.store AS
SELECT f.session_id AS prefix,
       f.metadata->'store_item'->>'key' AS key,
       f.metadata->'store_item'->'value' AS value,
       coalesce((f.metadata->'store_item'->>'created_at')::timestamptz, f.recorded_at) AS created_at,
       f.recorded_at AS updated_at,
       f.expires_at,
       f.ttl_minutes
  FROM beads.facts f
 WHERE f.metadata ? 'store_item' AND f.status = 'active';
