-- Why a supersedes edge exists, and whether it was undone. Capture writes some supersedes edges
-- itself (memory.supersession): those are marked automatic and carry the rule's reason, so the
-- inspector can show them and a person can undo one. An undone edge stays as history; it no longer
-- counts as the old fact's successor, so the old fact may be superseded again.
ALTER TABLE beads.edges
    ADD COLUMN automatic boolean NOT NULL DEFAULT false,
    ADD COLUMN reason text,
    ADD COLUMN undone_at timestamptz;

DROP INDEX beads.edges_one_successor;
CREATE UNIQUE INDEX edges_one_successor ON beads.edges (dst)
    WHERE relation = 'supersedes' AND undone_at IS NULL;
