-- Vectors for the LangGraph store items written before 0010.
--
-- Since 0010 a BeadsStore search scores an item by its rows in beads.item_vectors, and an item with
-- none is listed after the scored hits, unscored (as an item put with index=False). Items put before
-- 0010 have none: their store kept one vector per item, the fact's own (its indexed texts joined, one
-- per line), so after the upgrade every one of them fell to the unscored tail. That vector is the one
-- an item of a single text gets today, so it is copied as the item's text 0 in every space the fact
-- was embedded in. Items put with index=False (`indexed` false) stay without one, as a put today
-- leaves them. Items that already have vectors in a space are left alone.
INSERT INTO beads.item_vectors (fact_id, embedder_id, ord, embedding)
SELECT v.fact_id, v.embedder_id, 0, v.embedding
  FROM beads.fact_vectors v
  JOIN beads.facts f ON f.id = v.fact_id
 WHERE f.metadata ? 'store_item'
   AND coalesce((f.metadata->'store_item'->>'indexed')::boolean, true)
   AND NOT EXISTS (SELECT 1 FROM beads.item_vectors i
                    WHERE i.fact_id = v.fact_id AND i.embedder_id = v.embedder_id);
