"""Budget-matched evaluation of what reaches a fixed context window, on external conversations.

Loaders normalise LoCoMo, BEAM and LongMemEval into one model (`conversation`); ingestion writes each
conversation once into the fact graph and LangGraph's PostgresStore (`ingest`); the arms build a
window per question at each token budget (`arms`, `window`, counted by `tokens`); `metrics` scores
windows with no model, `judging` answers and grades when models are given; `runner` writes one JSONL
row per (question, arm, budget) and `report` turns the rows into a summary and a plot. Run
`python -m bench.eval --help`.
"""

from memory.extras import require_extra

# bm25s (the BM25 arm and the answer-word metric), matplotlib (the plot), LangGraph's PostgresStore
# (the docstore arm): checked here, once, so a missing extra is named before any run starts
require_extra("eval", ("bm25s", "matplotlib", "langgraph.store.postgres"), "the evaluation harness")
