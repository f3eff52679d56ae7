"""The two lanes of the comparison, built the same way so only the memory differs.

Both get the same model, the same web-search tool, the same core system prompt and a research
sub-agent. The stock lane remembers through LangMem's manage_memory / search_memory on LangGraph's
PostgresStore (namespace ("memories", session_id)); our lane through BeadsMemoryMiddleware. The
playground and the evaluation build their agents here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    InputAgentState,
    ModelCallLimitMiddleware,
    OutputAgentState,
    ToolRetryMiddleware,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer

from memory.context.assembler import InjectionMode
from memory.doors.middleware import BeadsMemoryMiddleware, CaptureMode
from memory.doors.subagents import make_subagent_tool
from memory.doors.tools import MEMORY_TOOL_NAMES
from memory.graph.store import FactStore
from playground.comparison.replay_safe import ReplaySafeMemoryCreates
from playground.comparison.stock import STOCK_NAMESPACE_ROOT

CORE_SYSTEM_PROMPT = (
    "You are a capable assistant working with the user over many separate conversations. "
    "Be concise. Use the user's stated constraints and their latest corrections. "
    "Use web_search for current information and delegate_research for a larger research task."
)
STOCK_MEMORY_PROMPT = (
    "You have a long-term memory: save durable facts the user states with manage_memory, and call "
    "search_memory before answering anything that may depend on what they said earlier."
)
# corrections are captured and applied without the model (memory.graph.supersession): the prompt asks for
# an answer, not for bookkeeping; a model with the memory tools may still correct what capture missed
BEADS_MEMORY_PROMPT = (
    "Relevant facts from earlier conversations appear below under Memory, most relevant first; "
    "a correction the user made has already replaced the old value there. Answer the user in plain "
    "words, using those facts."
)
BEADS_TOOLS_PROMPT = (
    "If the user corrects a fact that Memory still lists as current, record the correction with "
    "remember_fact, passing the old fact's id as `supersedes`."
)
RESEARCH_NAME = "delegate_research"
#: every tool either lane may hold: a final reply that names one talks of the lane's machinery, not
#: of the user's matter (memory.rules.conclusions.why_no_answer)
LANE_TOOL_NAMES = (
    "manage_memory",
    "search_memory",
    "web_search",
    RESEARCH_NAME,
    *sorted(MEMORY_TOOL_NAMES),
)


#: the lanes' memory tools: a reply that says back what one of them returned answers from memory (the
#: stock lane's memory reaches its model only through search_memory), not a tool's output said back
MEMORY_TOOLS = frozenset({"manage_memory", "search_memory", *MEMORY_TOOL_NAMES})


def beads_prompt(memory_tools: bool = True) -> str:
    """Our lane's system prompt, with the memory tools' instruction when they are bound."""
    memory = f"{BEADS_MEMORY_PROMPT} {BEADS_TOOLS_PROMPT}" if memory_tools else BEADS_MEMORY_PROMPT
    return f"{CORE_SYSTEM_PROMPT}\n\n{memory}"


# small models can call the same tool again and again; both lanes stop at the same bound
MAX_MODEL_CALLS = 12

# what create_agent compiles with no structured output; a run's context is the caller's to choose
Agent = CompiledStateGraph[AgentState[Any], Any, InputAgentState, OutputAgentState[Any]]


def tool_error_text(exc: Exception) -> str:
    """A failed tool call's result as LangGraph's ToolNode words it when it hands errors back."""
    return f"Error: {exc!r}\n Please fix your mistakes."


def tool_errors_to_model() -> AgentMiddleware[Any, Any]:
    """Every tool's error goes back to the model as that tool's result (status "error"), in both
    lanes alike: create_agent's tool node hands back only invalid arguments and re-raises the rest,
    so a model that called LangMem's manage_memory badly ("You must provide a MEMORY ID ...")
    failed the whole turn where it could have tried again. A BaseException that is no Exception
    (LangMem's ConfigurationError: the lane itself is misconfigured) still fails the lane."""
    return ToolRetryMiddleware(max_retries=0, retry_on=(Exception,), on_failure=tool_error_text)


def _call_limit(max_model_calls: int | None) -> list[AgentMiddleware[Any, Any]]:
    return (
        []
        if max_model_calls is None
        else [ModelCallLimitMiddleware(run_limit=max_model_calls, exit_behavior="end")]
    )


def stock_research_tool(model: BaseChatModel, tools: Sequence[BaseTool]) -> BaseTool:
    """The stock lane's sub-agent: its result comes back as a message, with no link to memory."""

    def delegate_research(task: str, researcher: str = "researcher") -> str:
        """Delegate a research task to a sub-agent; returns its answer."""
        agent = create_agent(
            model, tools=list(tools), system_prompt="You are a research sub-agent. Answer the task."
        )
        try:
            final = agent.invoke({"messages": [HumanMessage(task)]})["messages"][-1]
        except Exception as exc:  # a crashed researcher silently returns nothing in the stock design
            return f"The research sub-agent failed: {type(exc).__name__}"
        return final.text if isinstance(final, AIMessage) else ""

    return StructuredTool.from_function(delegate_research)


def stock_tools(
    model: BaseChatModel, tools: Sequence[BaseTool] = (), *, research: bool = True
) -> list[BaseTool]:
    """The stock lane's tools, in the order its model sees them: LangMem's two, then the rest."""
    from langmem import create_manage_memory_tool, create_search_memory_tool

    namespace = (STOCK_NAMESPACE_ROOT, "{session_id}")
    all_tools = [
        create_manage_memory_tool(namespace=namespace),
        create_search_memory_tool(namespace=namespace),
        *tools,
    ]
    if research:
        all_tools.append(stock_research_tool(model, tools))
    return all_tools


def build_stock_agent(
    model: BaseChatModel,
    store: BaseStore,
    *,
    tools: Sequence[BaseTool] = (),
    checkpointer: Checkpointer = None,
    research: bool = True,
    max_model_calls: int | None = MAX_MODEL_CALLS,
) -> Agent:
    """create_agent + LangMem tools on `store` (PostgresStore or AsyncPostgresStore).

    Run it with config {"configurable": {"thread_id": ..., "session_id": ...}}: LangMem fills its
    namespace template from `configurable`, not from the runtime context.
    """
    return create_agent(
        model,
        tools=stock_tools(model, tools, research=research),
        system_prompt=f"{CORE_SYSTEM_PROMPT}\n\n{STOCK_MEMORY_PROMPT}",
        # a resumed turn may run a tool call twice: LangMem would store its memory twice
        middleware=[ReplaySafeMemoryCreates(), tool_errors_to_model(), *_call_limit(max_model_calls)],
        store=store,
        checkpointer=checkpointer,
        name="stock",
    )


def build_beads_agent(
    model: BaseChatModel,
    store: FactStore,
    session_id: str | None = None,
    *,
    tools: Sequence[BaseTool] = (),
    checkpointer: Checkpointer = None,
    research: bool = True,
    window: int = 10,
    max_model_calls: int | None = MAX_MODEL_CALLS,
    injection: InjectionMode = "always",
    capture: CaptureMode = "eager",
    memory_tools: bool = True,
) -> tuple[Agent, BeadsMemoryMiddleware]:
    """create_agent + BeadsMemoryMiddleware (`injection` and `capture` as the middleware takes them;
    its sub-agents capture the same way).

    Like the stock agent, it is compiled once and told the session per run, in
    {"configurable": {"session_id": ...}} (or the run's context); `session_id` here only sets a
    default for runs that name none. `memory_tools=False` binds none of the memory tools (the
    middleware's `bind_tools`); memory works the same without them.
    """
    root = store.root(session_id) if session_id is not None else None
    all_tools = list(tools)
    if research:
        all_tools.append(
            make_subagent_tool(
                store, root, model, tools, name=RESEARCH_NAME, capture=capture, memory_tools=memory_tools
            )
        )
    middleware = BeadsMemoryMiddleware(
        store,
        root,
        window=window,
        skip_capture_tools={RESEARCH_NAME},
        injection=injection,
        capture=capture,
        bind_tools=memory_tools,
    )
    agent = create_agent(
        model,
        tools=all_tools,
        system_prompt=beads_prompt(memory_tools),
        middleware=[middleware, tool_errors_to_model(), *_call_limit(max_model_calls)],
        checkpointer=checkpointer,
        name="beads",
    )
    return agent, middleware
