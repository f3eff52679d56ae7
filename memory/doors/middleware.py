"""`BeadsMemoryMiddleware`: fact-graph memory for `langchain.agents.create_agent`.

Per model call it
  1. captures new user messages (verbatim, split into claims) and non-memory tool results into the
     calling agent's namespace, with no extraction model (`capture="eager"`, the default); with
     `capture="evict"` it captures them instead where they would be lost: when they leave the model's
     view, when a sub-agent is forked, and at the end of the thread;
  2. builds the model's view of the raw messages (state keeps everything): the last `window`
     messages, or with `window_tokens` as much of the history as that budget holds, old tool output
     cleared to a placeholder first; with `context_tokens` the window's budget is what the context
     leaves after the reply's reserve, the system prompt and the two fact tiers;
  3. takes the query from the FULL message list (a turn with many tool calls would otherwise leave the
     window without a user message, and memory would silently switch off);
  4. asks the injection gate whether to recall at all (`injection`: always, gated, never), and fills
     the retrieved tier with ranked facts for the query in score order until its token budget is
     spent (or the relevance floor stops it), skipping facts whose source message is still in view
     and facts that are pinned (memory.context.block.fill_retrieved);
  5. assembles pinned facts, retrieved facts and the view under their token budgets and the model's
     context (see memory.context.assembler), puts both fact tiers into the system prompt for that call only,
     and reports the whole assembly as a custom stream event.
Steps 2 to 5 are `plan_call` (memory.context.recall.plan_call), which the evaluation's `beads` arm calls too.
At the end of the turn the final answer is captured as a conclusion.

Before step 1 it checks that the model can bind the tools the call offers it, and refuses with
`ModelCannotBindToolsError` (naming the two ways out) instead of capturing a message for a call
that cannot be made. Capture is keyed by the thread and the message's place in it, not by the id
LangGraph gives a message on arrival: a rerun of the same input (after a model error, or a client
that sends the whole conversation every time) writes nothing new, as a checkpoint replay does not.

Every hook resolves the session's namespace for the call it is in (memory.doors.scope): from the run's
`context` or `configurable` (`session_id`), the namespace given to the constructor being only the
default. So one compiled agent serves every session, as a stock agent with LangMem's
`("memories", "{session_id}")` namespace does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.config import get_config, get_stream_writer
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command
from psycopg import Error as DatabaseError
from psycopg_pool import PoolTimeout

from memory.context.assembler import (
    INJECTION_MODES,
    Budgets,
    InjectionMode,
    MessageSlot,
    Role,
    WindowFit,
    cleared_text,
    fit_window,
)
from memory.context.block import TierSettings, describe_injection, describe_pinned
from memory.context.recall import CallPlan, plan_call
from memory.context.tokens import count_cached
from memory.doors.capture import Said, answer_key, capture_answer, capture_said
from memory.doors.scope import SessionScope
from memory.doors.tools import MEMORY_TOOL_NAMES, memory_tools
from memory.errors import ModelCannotBindToolsError
from memory.events import CAPTURE_EVENT, INJECTION_EVENT, CaptureEvent, InjectionEvent
from memory.graph.store import FactStore
from memory.model import CaptureResult, Namespace
from memory.retrieval import SearchOptions
from memory.rules.clean_text import DEFAULT_MAX_MESSAGE_CHARS

logger = logging.getLogger(__name__)

# role markers and separators a chat template adds around each message; counted so that no message,
# not even an empty tool-calling one, is free
MESSAGE_OVERHEAD_TOKENS = 4
# set on a tool's metadata by memory.doors.subagents: calling it forks a sub-agent, a point where the
# supervisor's context is not carried over, so evict-mode capture runs first
FORK_TOOL_METADATA = "beads_fork"

CaptureMode = Literal["eager", "evict"]
# the reply's share of a known context, and the retrieved tier's share of what is left for the prompt.
# The share was chosen on the harness's tune conversations (results/tuning/README.md): 1/3 (the
# seed's) left two thirds to a raw window that rarely holds old evidence, and more than 0.8 gained
# nothing over it. The window keeps the rest for the recent turns.
RESERVE_TOKENS = 512
RETRIEVED_SHARE = 0.8


def _union(left: list[str] | None, right: list[str] | None) -> list[str]:
    """Reducer of `beads_captured`: several nodes of one step (parallel tool calls, a model call) may
    each report the ids they captured."""
    merged = list(left or [])
    seen = set(merged)
    for item in right or []:
        if item not in seen:
            seen.add(item)
            merged.append(item)
    return merged


class BeadsState(AgentState):
    beads_captured: NotRequired[Annotated[list[str], PrivateStateAttr, _union]]


def message_text(message: AnyMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def trim_window(messages: Sequence[AnyMessage], size: int) -> list[AnyMessage]:
    """The last `size` messages, never starting on a tool result whose call was cut off (the
    assembler's message-count window, which is what the middleware shows)."""
    if size < 1:
        return []
    kept = fit_window([MessageSlot(_role(m), 0) for m in messages], recent_messages=size).kept
    return [messages[i] for i in kept]


def query_from(messages: Sequence[AnyMessage]) -> str:
    """The latest user message in the full list: what the model is being asked, however many tool
    calls came after it."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message_text(message).strip()
    return ""


def cleared_placeholder(message: ToolMessage, tokens: int) -> str:
    return cleared_text(message.name or "tool", tokens)


def cleared_tool_message(message: ToolMessage, tokens: int) -> ToolMessage:
    """The placeholder shown for a cleared tool result: same call id, so the pairing stays valid."""
    return ToolMessage(
        content=cleared_placeholder(message, tokens),
        tool_call_id=message.tool_call_id,
        name=message.name,
        id=message.id,
        status=message.status,
    )


def _role(message: AnyMessage) -> Role:
    if isinstance(message, HumanMessage):
        return "human"
    if isinstance(message, AIMessage):
        return "ai"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, SystemMessage):
        return "system"
    return "other"


def _counted_text(message: AnyMessage) -> str:
    text = message_text(message)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
        text += "\n" + json.dumps(calls, ensure_ascii=False, sort_keys=True)
    return text


def message_slots(messages: Sequence[AnyMessage]) -> list[MessageSlot]:
    """What the assembler needs to know of each raw message: its role and what it costs."""
    counts = count_cached([_counted_text(m) for m in messages])
    slots = []
    for message, tokens in zip(messages, counts, strict=True):
        cost = tokens + MESSAGE_OVERHEAD_TOKENS
        cleared = 0
        if isinstance(message, ToolMessage):
            [cleared] = count_cached([cleared_placeholder(message, cost)])
            cleared += MESSAGE_OVERHEAD_TOKENS
        slots.append(MessageSlot(_role(message), cost, cleared, getattr(message, "name", "") or ""))
    return slots


def _turn_tool_results(messages: Sequence[AnyMessage]) -> list[str]:
    """The texts the tools returned since the user's last message: what a final answer may only be
    saying back."""
    turn: list[str] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage):
            turn.append(message_text(message))
    return turn


def _turn_tool_names(messages: Sequence[AnyMessage]) -> list[str]:
    """The tools the agent called since the user's last message: a final answer that names one talks
    of its machinery, not of the user's matter."""
    names: list[str] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage):
            names.extend(call["name"] for call in message.tool_calls)
    return names


def _thread_id() -> str | None:
    try:
        return get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # called outside a runnable context
        return None


def _context(runtime: object) -> Any:
    """The run's context from a hook's runtime (None when the run has none); whatever the caller
    passed as `context`, which memory.doors.scope reads."""
    return getattr(runtime, "context", None)


def capture_key(thread_id: str | None, position: int) -> str:
    """What a captured message's facts are keyed by: its thread and its place in the thread's
    messages. A message gets a fresh id each time the same input is sent again, its place does not."""
    return f"{thread_id or ''}#{position}"


def _tool_names(tools: Sequence[Any]) -> list[str]:
    names = []
    for tool in tools:
        if isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name")
        else:
            name = getattr(tool, "name", None)
        names.append(str(name or tool))
    return names


def check_tool_binding(model: object, tools: Sequence[Any]) -> None:
    """Refuse a call that offers tools to a chat model that cannot bind them (one that leaves
    `bind_tools` to BaseChatModel, which raises a bare NotImplementedError once the call is made)."""
    if not tools or not isinstance(model, BaseChatModel):
        return
    if type(model).bind_tools is not BaseChatModel.bind_tools:
        return
    names = _tool_names(tools)
    ours = [n for n in names if n in MEMORY_TOOL_NAMES]
    theirs = [n for n in names if n not in MEMORY_TOOL_NAMES]
    kind = type(model).__name__
    double = "in tests, memory.testing.ScriptedChatModel, which binds tools and records its prompts"
    if not theirs:
        raise ModelCannotBindToolsError(
            f"{kind} cannot bind tools (it does not implement bind_tools), and BeadsMemoryMiddleware "
            f"offers it the memory tools ({', '.join(ours)}). Either build the middleware with "
            "BeadsMemoryMiddleware(store, bind_tools=False): capture, corrections and recall work "
            f"without them; or use a chat model that supports tool calling ({double}). "
            "Nothing was captured."
        )
    also = f", and BeadsMemoryMiddleware the memory tools ({', '.join(ours)})" if ours else ""
    drop = " and the middleware with bind_tools=False" if ours else ""
    raise ModelCannotBindToolsError(
        f"{kind} cannot bind tools (it does not implement bind_tools), and the agent offers it "
        f"its own tools ({', '.join(theirs)}){also}. Either use a chat model that supports tool "
        f"calling ({double}); or create the agent with tools=[]{drop}. Nothing was captured."
    )


def _emit(event: InjectionEvent | CaptureEvent | dict[str, Any]) -> None:
    with contextlib.suppress(RuntimeError):  # outside a graph there is no stream to write to
        get_stream_writer()(event)


def _capture_event(
    message_id: str | None, outcome: Literal["clipped", "cleaned", "failed"], notes: Sequence[str]
) -> CaptureEvent:
    """What became of one message that capture could not store as it came."""
    return {"type": "beads_capture", "message_id": message_id, "outcome": outcome, "notes": list(notes)}


def _report_capture(message_id: str | None, result: CaptureResult) -> None:
    notes = list(result.cleaned)
    if result.clipped_from is not None:
        kept = sum(1 for _ in result.facts)
        notes.append(
            f"kept the first part of {result.clipped_from} characters ({kept} claims); the rest was not stored"
        )
    if notes:
        logger.info("capture of message %s: %s", message_id, "; ".join(notes))
        _emit(_capture_event(message_id, "clipped" if result.clipped_from is not None else "cleaned", notes))


@dataclasses.dataclass(frozen=True, slots=True)
class _Prepared:
    request: ModelRequest
    event: dict[str, Any]
    captured: list[str]  # ids captured by this call: on arrival (eager mode) or at eviction (evict)


class BeadsMemoryMiddleware(AgentMiddleware[BeadsState, Any]):
    """Capture verbatim, inject a small ranked block; see the module docstring.

    Budgets (tokens, counted with memory.context.tokens): `pinned_tokens` and `retrieved_tokens` for the two
    fact tiers, `window_tokens` for the raw messages (None: the last `window` messages, as before),
    `context_tokens` for the model's whole context (None: unbounded) with `reserve_tokens` kept free
    for the reply. With `context_tokens` the retrieved tier gets `retrieved_share` of what the reserve,
    the system prompt and the pins leave (None: `retrieved_tokens` whatever the context), and what
    the window or the tier cannot use goes to the other. `tier` says how the tier spends its budget
    (memory.context.block.TierSettings: how many facts to ask for, thin claims and their passages).

    `namespace` is the default memory: a run that names its session (`context` or `configurable`
    `session_id`, see memory.doors.scope) works in that session's root instead; with no namespace every run
    must name one. `agent_id` None acts as the resolved namespace's agent. `bind_tools=False` offers the
    model no memory tools but what its role requires (remember_fact, pin_fact and recall_from_subagents
    go; a sub-agent keeps conclude_task, which its run requires): memory still captures, corrects and
    recalls without them.
    """

    state_schema = BeadsState

    def __init__(
        self,
        store: FactStore,
        namespace: Namespace | None = None,
        *,
        agent_id: str | None = None,
        acting_on_behalf_of: str | None = "user",
        role: Literal["orchestrator", "subagent"] = "orchestrator",
        window: int = 10,
        window_tokens: int | None = None,
        pinned_tokens: int | None = 400,
        retrieved_tokens: int | None = 1200,
        retrieved_share: float | None = RETRIEVED_SHARE,
        context_tokens: int | None = None,
        reserve_tokens: int = RESERVE_TOKENS,
        injection: InjectionMode = "always",
        capture: CaptureMode = "eager",
        search_options: SearchOptions | None = None,
        tier: TierSettings | None = None,
        capture_final: bool | None = None,
        capture_tool_results: bool = True,
        skip_capture_tools: Collection[str] = (),
        bind_tools: bool = True,
        max_message_chars: int | None = DEFAULT_MAX_MESSAGE_CHARS,
        name: str | None = None,
    ) -> None:
        super().__init__()
        if injection not in INJECTION_MODES:
            raise ValueError(f"injection must be one of {', '.join(INJECTION_MODES)}, not {injection!r}")
        if capture not in ("eager", "evict"):
            raise ValueError(f"capture must be eager or evict, not {capture!r}")
        self.store = store
        self.namespace = namespace
        self.scope = SessionScope(store, namespace)
        self.agent_id = agent_id or (namespace.agent_id if namespace is not None else None)
        self.acting_on_behalf_of = acting_on_behalf_of
        self.role = role
        self.budgets = Budgets(
            pinned=pinned_tokens,
            retrieved=retrieved_tokens,
            window=window_tokens,
            recent_messages=window,
            context=context_tokens,
            reserve=reserve_tokens,
            retrieved_share=retrieved_share,
        )
        self.tier = tier or TierSettings()
        if not bind_tools:
            # no memory tool will name a fact by its id: the block spends no tokens on ids
            self.tier = dataclasses.replace(self.tier, style=dataclasses.replace(self.tier.style, ids=False))
        self.injection: InjectionMode = injection
        self.capture: CaptureMode = capture
        self.search_options = search_options or store.search_options
        # a fork's final answer is not the orchestrator's conclusion: it concludes with conclude_task
        self.capture_final = (role == "orchestrator") if capture_final is None else capture_final
        self.capture_tool_results = capture_tool_results
        self.skip_capture_tools = frozenset(MEMORY_TOOL_NAMES) | frozenset(skip_capture_tools)
        # tools that fork a sub-agent (memory.doors.subagents), learnt as they are called
        self._fork_tools: set[str] = set()
        # capture keeps at most this much of one message (the model still reads all of it)
        self.max_message_chars = max_message_chars
        # capture, automatic supersession and recall need no tool call; a model too small to choose
        # tools well is better off without them (a 0.5B model called them instead of answering)
        self.tools = memory_tools(store, self.scope, self.agent_id, role, optional=bind_tools)
        self._name = name

    @property
    def name(self) -> str:
        return self._name or (f"BeadsMemory[{self.agent_id}]" if self.agent_id else "BeadsMemory")

    def resolve(self, context: Any = None) -> Namespace:
        """The namespace the current call works in (memory.doors.scope)."""
        return self.scope.resolve(context)

    def _agent(self, ns: Namespace) -> str:
        return self.agent_id or ns.agent_id

    # -- capture -------------------------------------------------------------------------------

    def _capturable(self, message: AnyMessage) -> bool:
        if isinstance(message, HumanMessage):
            return True
        return (
            isinstance(message, ToolMessage)
            and self.capture_tool_results
            and message.name not in self.skip_capture_tools
            # a sub-agent's return is its summary, which the fork stored as a summary fact already
            and message.name not in self._fork_tools
            and message.status != "error"
        )

    def _capture(
        self,
        ns: Namespace,
        messages: Sequence[AnyMessage],
        seen: Collection[str],
        positions: Collection[int] | None = None,
    ) -> list[str]:
        """Capture each capturable message of the thread's `messages` (only those at `positions`, if
        given) not in `seen`; returns the ids handled. Writes are idempotent, so a replay that captures
        a message again writes no row."""
        new: list[str] = []
        thread_id = _thread_id()
        for position, message in enumerate(messages):
            if positions is not None and position not in positions:
                continue
            if message.id is None or message.id in seen or message.id in new or not self._capturable(message):
                continue
            try:
                result = capture_said(
                    self.store,
                    ns,
                    message_text(message),
                    by=self._said_by(message),
                    max_chars=self.max_message_chars,
                    agent_id=self._agent(ns),
                    acting_on_behalf_of=self.acting_on_behalf_of,
                    thread_id=thread_id,
                    message_id=message.id,
                    source_key=capture_key(thread_id, position),
                )
            except Exception as exc:
                # not marked captured: the next call of this thread tries again, and nothing is lost
                logger.warning("capture of message %s failed; the turn goes on", message.id, exc_info=True)
                _emit(_capture_event(message.id, "failed", [f"{type(exc).__name__}: {exc}"]))
                continue
            _report_capture(message.id, result)
            new.append(message.id)
        return new

    def _said_by(self, message: AnyMessage) -> Said:
        """A sub-agent's human messages are its task and the wrapper's reminders, not the user's."""
        if not isinstance(message, HumanMessage):
            return "tool"
        return "delegation" if self.role == "subagent" else "user"

    def _evicted(
        self,
        ns: Namespace,
        messages: Sequence[AnyMessage],
        shown: Collection[int],
        state: Mapping[str, Any],
        done: Collection[str] = (),
    ) -> list[str]:
        """Evict mode: capture what is not shown verbatim (dropped, or cleared to a placeholder)."""
        if self.capture != "evict":
            return []
        gone = [i for i in range(len(messages)) if i not in shown]
        return self._capture(ns, messages, {*state.get("beads_captured", ()), *done}, gone)

    def capture_pending(self, state: Mapping[str, Any], namespace: Namespace | None = None) -> list[str]:
        """Capture every message of `state` not captured yet (thread end, fork, merge) into `namespace`
        (None: the current call's); returns the ids."""
        ns = namespace or self.resolve()
        return self._capture(ns, state.get("messages", []), set(state.get("beads_captured", ())))

    def _capture_final(self, ns: Namespace, state: Mapping[str, Any]) -> None:
        if not self.capture_final or not state["messages"]:
            return
        final = state["messages"][-1]
        if not isinstance(final, AIMessage) or final.tool_calls:
            return
        thread_id = _thread_id()
        question = next((m for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), None)
        try:
            capture_answer(
                self.store,
                ns,
                message_text(final),
                key=answer_key(thread_id, question.id if question is not None else None),
                tool_results=_turn_tool_results(state["messages"]),
                asked=message_text(question) if question is not None else "",
                tool_names=[*(t.name for t in self.tools), *_turn_tool_names(state["messages"])],
                agent_id=self._agent(ns),
                acting_on_behalf_of=self.acting_on_behalf_of,
                thread_id=thread_id,
                message_id=final.id,
            )
        except Exception as exc:  # the answer is given already; losing its note is no failure
            logger.warning("capture of the final answer %s failed", final.id, exc_info=True)
            _emit(_capture_event(final.id, "failed", [f"{type(exc).__name__}: {exc}"]))

    def _end_thread(self, state: Mapping[str, Any], context: Any) -> dict[str, Any] | None:
        # the thread's messages are about to be out of every later call's reach: capture what is left
        try:
            ns = self.resolve(context)
        except (DatabaseError, PoolTimeout):
            logger.warning("memory unavailable at the end of the turn; nothing more captured", exc_info=True)
            return None
        new = self.capture_pending(state, ns) if self.capture == "evict" else []
        self._capture_final(ns, state)
        return {"beads_captured": new} if new else None

    def after_agent(self, state: BeadsState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._end_thread(state, _context(runtime))

    async def aafter_agent(self, state: BeadsState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await self.store.aio.run(self._end_thread, state, _context(runtime))

    # -- fork: a sub-agent starts without the supervisor's context ------------------------------

    def _is_fork(self, request: ToolCallRequest) -> bool:
        tool = request.tool
        return (
            self.capture == "evict"
            and tool is not None
            and bool((tool.metadata or {}).get(FORK_TOOL_METADATA))
        )

    @staticmethod
    def _with_captured(result: ToolMessage | Command[Any], captured: list[str]) -> ToolMessage | Command[Any]:
        if captured and isinstance(result, ToolMessage):
            return Command(update={"messages": [result], "beads_captured": captured})
        return result

    def _note_fork_tool(self, request: ToolCallRequest) -> None:
        tool = request.tool
        if tool is not None and (tool.metadata or {}).get(FORK_TOOL_METADATA):
            self._fork_tools.add(tool.name)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        self._note_fork_tool(request)
        if not self._is_fork(request):
            return handler(request)
        captured = self.capture_pending(request.state, self.resolve(_context(request.runtime)))
        return self._with_captured(handler(request), captured)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        self._note_fork_tool(request)
        if not self._is_fork(request):
            return await handler(request)
        ns = await self.store.aio.run(self.resolve, _context(request.runtime))
        captured = await self.store.aio.run(self.capture_pending, request.state, ns)
        return self._with_captured(await handler(request), captured)

    # -- recall, assembly and injection ----------------------------------------------------------

    def plan_call(
        self,
        history: Sequence[MessageSlot],
        message_ids: Sequence[str | None],
        query: str,
        fixed_tokens: int,
        *,
        exclude_message_ids: frozenset[str] = frozenset(),
        before_search: Callable[[WindowFit], None] | None = None,
        namespace: Namespace | None = None,
    ) -> CallPlan:
        """What this middleware decides for one model call over `history` (memory.context.recall.plan_call
        with this middleware's budgets, gate, search options and tier settings) in `namespace` (None:
        the current call's). Reads only; the evaluation's `beads` arm calls it as the middleware does."""
        options = self.search_options
        if exclude_message_ids:
            options = dataclasses.replace(
                options, exclude_message_ids=options.exclude_message_ids | exclude_message_ids
            )
        return plan_call(
            self.store,
            namespace or self.resolve(),
            history=history,
            message_ids=message_ids,
            query=query,
            fixed_tokens=fixed_tokens,
            budgets=self.budgets,
            injection=self.injection,
            options=options,
            tier=self.tier,
            before_search=before_search,
        )

    def _prepare(self, request: ModelRequest) -> _Prepared:
        try:
            return self._prepare_with_memory(request)
        except (DatabaseError, PoolTimeout) as exc:
            # the memory's database is unreachable: the model answers without a block rather than not
            # at all; what arrived is captured by the next call that reaches the database
            logger.warning(
                "memory unavailable for this model call; it goes on without a block", exc_info=True
            )
            event = {
                "type": INJECTION_EVENT,
                **describe_injection(None, "", {}),
                "block": "",
                "error": f"memory unavailable: {type(exc).__name__}: {exc}",
            }
            return _Prepared(request, event, [])

    def _prepare_with_memory(self, request: ModelRequest) -> _Prepared:
        ns = self.resolve(_context(request.runtime))
        full = list(request.state["messages"])
        # eager mode: what arrived since the last call is stored before the search, so that a
        # correction has superseded the value it corrects by the time the block is built
        arrived = self.capture_pending(request.state, ns) if self.capture == "eager" else []
        slots = message_slots(full)
        base = request.system_message.text if request.system_message is not None else ""
        [fixed] = count_cached([base])
        captured: list[str] = []

        def evict(fit: WindowFit) -> None:
            # evict mode: what leaves the view in this call is stored before the search, so that it
            # can be recalled in this very call (captured after it, it would reach retrieval a call late)
            captured.extend(self._evicted(ns, full, set(fit.kept) - fit.cleared, request.state))

        query = query_from(full)
        call = self.plan_call(slots, [m.id for m in full], query, fixed, before_search=evict, namespace=ns)
        assembly, result = call.assembly, call.result
        system = "\n\n".join(part for part in (base, call.block) if part)
        view: list[AnyMessage] = []
        for i in assembly.window:
            message = full[i]
            if i in assembly.cleared and isinstance(message, ToolMessage):  # only tool results are cleared
                message = cleared_tool_message(message, slots[i].tokens)
            view.append(message)
        if result is not None and result.hits:  # what expiry reads; search itself stays a pure read
            self.store.note_retrieved([hit.fact.id for hit in result.hits])

        # and what the context limit dropped after the search (a rare overflow): stored now
        captured += self._evicted(ns, full, set(assembly.window) - assembly.cleared, request.state, captured)

        passages = call.tier.passages if call.tier is not None else {}
        described = describe_injection(result, call.block, passages)
        event = {
            "type": INJECTION_EVENT,
            "agent_id": self._agent(ns),
            "namespace_id": str(ns.id),
            "window_messages": len(view),
            "history_messages": len(full),
            **described,
            "block": call.block,  # the text put into the system prompt, exactly as the model read it
            "query": query or None,
            "pinned": describe_pinned(call.pins, {p.fact.id for p in call.injected_pins}),
            "gate": call.plan.gate.describe(),
            "retrieved_tier": None if call.tier is None else call.tier.describe(call.plan.retrieved),
            "assembly": assembly.describe(),
            "capture": {"mode": self.capture, "captured_at_eviction": len(captured)},
        }
        overridden = request.override(system_message=SystemMessage(system) if system else None, messages=view)
        return _Prepared(overridden, event, arrived + captured)

    @staticmethod
    def _respond(
        prepared: _Prepared, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        # the handler returns a plain ModelResponse (create_agent collects inner middlewares'
        # commands separately), so the ids this call captured ride along as our own command
        if not prepared.captured:
            return response
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"beads_captured": prepared.captured})
        )

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        check_tool_binding(request.model, request.tools)
        prepared = self._prepare(request)
        _emit(prepared.event)
        return self._respond(prepared, handler(prepared.request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        check_tool_binding(request.model, request.tools)
        prepared = await self.store.aio.run(self._prepare, request)
        _emit(prepared.event)
        return self._respond(prepared, await handler(prepared.request))


__all__ = [
    "CAPTURE_EVENT",
    "FORK_TOOL_METADATA",
    "INJECTION_EVENT",
    "BeadsMemoryMiddleware",
    "BeadsState",
    "CaptureMode",
    "capture_key",
    "check_tool_binding",
    "message_slots",
    "message_text",
    "query_from",
    "trim_window",
]
