-- A message said again as it was (a chat replayed, a script run twice) writes nothing new: capture
-- finds the current fact with the same claim, cut from the same message, before it inserts one.
-- md5 keeps the key short whatever the length of a claim.
CREATE INDEX IF NOT EXISTS facts_current_body ON beads.facts (namespace_id, md5(body))
    WHERE status = 'active' AND head_id = id;
