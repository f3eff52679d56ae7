"""The write rules, pure functions of text: how a message splits into claims (`splitting`), what text
may be stored (`clean_text`), the correction rules (`corrections/`), how two claims on one slot rank
(`slots`), which final answers are answers (`conclusions`).

May import the vocabulary only: no database, no embedder, nothing above."""
