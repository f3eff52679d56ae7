"""Web search for both lanes (ddgs). With no network it answers the agent with one plain sentence
instead of raising, and logs why: the error's text (DNS failures, the engines' URLs, a browser's
User-Agent) is no use to a model, which took it for facts about the world."""

from __future__ import annotations

import logging

from langchain_core.tools import BaseTool, StructuredTool

from memory.context.block import clip

_log = logging.getLogger(__name__)

MAX_RESULTS = 5
UNAVAILABLE = "Web search is unavailable right now, so answer from what you know and say so."


def search_web(query: str, max_results: int = MAX_RESULTS, timeout: int = 8) -> str:
    """Search the web and return the top results as text."""
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException

    query = query.strip()
    if not query:
        return "Web search needs a query."
    try:
        results = DDGS(timeout=timeout).text(query, max_results=max(1, min(max_results, 10)))
    except DDGSException as exc:
        _log.info("web search failed: %s", clip(str(exc), 400))
        return UNAVAILABLE
    if not results:
        return f"No web results for {query!r}."
    return "\n".join(
        f"{i}. {r.get('title', '').strip()} ({r.get('href', '')})\n   {clip(r.get('body', ''), 300)}"
        for i, r in enumerate(results, 1)
    )


def web_search_tool() -> BaseTool:
    def web_search(query: str) -> str:
        """Search the web for current information. Returns titles, links and snippets."""
        return search_web(query)

    return StructuredTool.from_function(web_search)
