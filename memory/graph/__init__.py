"""The fact graph: `FactStore` and the SQL behind its verbs. Facts and their provenance, revisions
and supersession, restatements, the nearest earlier claims capture reads, pins, reads for looking
back (`audit`), consolidation, bulk import, the background indexer, each embedder's thresholds.

May import `memory.retrieval`, `memory.postgres`, `memory.rules`, `memory.embedders` and the
vocabulary; never the context or a door."""
