"""The doors: every way into the memory. The `create_agent` middleware and its tools, sub-agents, the
MCP server, LangGraph's `BaseStore` over the fact graph, the CLI, what the HTTP API and MCP accept
(intake), capture, and which session a call works in.

May import every layer below: `memory.context`, `memory.graph`, `memory.retrieval`,
`memory.postgres`, `memory.rules`, `memory.embedders` and the vocabulary (`memory.model`,
`memory.errors`, ...). Nothing below imports a door (the import-linter layers contract)."""
