"""Postgres itself: pools on a URL, the embedded server and its pgvector, the numbered migrations'
runner, vectors as the database stores them, the statements worth preparing.

May import `memory.embedders` and the vocabulary only; it knows nothing of claims or rules."""
