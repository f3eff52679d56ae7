"""Multi-turn scenarios run through the playground's own turn runner: two scenarios, four arms,
objective checks per step, a blinded judge and the injected block's size as the store grows.

    uv run --extra dev python -m bench.scenarios --runs 3 --out results/scenarios

`script` holds the scenarios and the records their tools return, `checks` what is read off a reply,
`arms` the four arms, `runner` one arm through one scenario on a database of its own, `judge` the
judge's prompt and how transcripts are blinded, `report` the summary rebuilt from the rows.
"""
