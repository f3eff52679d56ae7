"""The offline chat model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) in-process through llama.cpp, or the
1.5B of the same family (``BEADS_LOCAL_MODEL=qwen2.5-coder-1.5b``, the ``local15`` extra).

No server and no network: the weights are joined from the installed packages on first use (see
:mod:`playground.models.weights`). It binds tools and streams like any chat model: content tokens as they
are generated, tool calls (parsed from the text the model writes, see :mod:`playground.models.toolcalls`)
as ``tool_call_chunks`` on the last chunk, with token counts on that chunk too. Once the model opens
a tool call, the rest of the call is generated under a grammar built from the bound tools' schemas
(see :mod:`playground.models.grammar`; ``BEADS_LOCAL_TOOL_GRAMMAR=false`` turns it off).

One model is loaded per process and shared by every instance with the same settings. A llama.cpp
context is not thread-safe, so generations take turns under a lock; async calls generate in a worker
thread so the event loop keeps running.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from concurrent.futures import Executor
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import agenerate_from_stream, generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

from memory.rules.conclusions import OPEN_TAG
from playground.models.chatml import IM_END, format_prompt, tool_choice_instruction
from playground.models.engine import Engine, LlamaLike, import_llama_cpp, require_local, shared_engine
from playground.models.grammar import tool_call_gbnf, uuids_in
from playground.models.settings import ModelSettings
from playground.models.toolcalls import call_opening, hold_index, parse_tool_calls
from playground.models.weights import LOCAL_MODELS, QWEN_CODER_05B

#: The default offline model's name (``LocalChatModel.model_name`` follows ``settings.local_model``).
MODEL_NAME = QWEN_CODER_05B.model_name

_log = logging.getLogger(__name__)


class LocalChatModel(BaseChatModel):
    """Qwen2.5-Coder-Instruct in-process, the size ``settings.local_model`` names. ``llama`` replaces
    the real model (for tests).

    Without the chosen model's extra (``local``, or ``local15`` for the 1.5B), constructing one raises
    :class:`memory.errors.MissingExtraError` naming it; the model itself loads on first use (or
    :meth:`load`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_name: str = MODEL_NAME
    settings: ModelSettings = Field(default_factory=ModelSettings)
    max_tokens: int = Field(default=512, ge=1)
    #: None: ``settings.temperature``.
    temperature: float | None = None
    #: Fixes the sampler's seed; None draws a new one per call.
    seed: int | None = None

    _injected: Engine | None = PrivateAttr(default=None)

    def __init__(self, *, llama: LlamaLike | None = None, **data: Any) -> None:
        super().__init__(**data)
        if "model_name" not in data:
            self.model_name = LOCAL_MODELS[self.settings.local_model].model_name
        if llama is not None:
            self._injected = Engine(llama)
        else:
            require_local(self.settings)

    @property
    def _llm_type(self) -> str:
        return "llama-cpp-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "n_ctx": self.settings.local_num_ctx}

    def load(self) -> None:
        """Load the model now rather than at the first call (at startup, say, to fail early)."""
        self._engine()

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _engine(self) -> Engine:
        return self._injected if self._injected is not None else shared_engine(self.settings)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Generator[ChatGenerationChunk, None, None]:
        tools: list[dict[str, Any]] = list(kwargs.get("tools") or [])
        tool_choice = kwargs.get("tool_choice")
        # a turn whose calls are spent is answered in words, under a grammar that admits no call
        spent = bool(tools) and tool_choice in (None, "auto") and calls_are_spent(messages)
        if tool_choice == "none" or spent:
            tools = []
        names = [tool["function"]["name"] for tool in tools]
        instruction = ANSWER_NOW if spent else tool_choice_instruction(tool_choice, names)
        prompt = format_prompt(messages, tools, instruction=instruction)
        engine = self._engine()
        shown, finish_reason = 0, None
        with engine.lock:
            llama = engine.llama
            prompt_tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            self._check_fits(len(prompt_tokens), llama.n_ctx())
            sampling: dict[str, Any] = {
                "temperature": self.settings.temperature if self.temperature is None else self.temperature,
                "stop": [IM_END, *(stop or [])],
                "seed": self.seed,
                "stream": True,
            }
            text = ""
            known_ids = uuids_in(format_prompt(messages)) if tools else []
            if spent and self.settings.local_tool_grammar:
                sampling["grammar"] = import_llama_cpp().LlamaGrammar.from_string(WORDS_GBNF, verbose=False)
            replies = self._completion(llama, prompt_tokens, tools, tool_choice, known_ids, sampling)
            # A caller that leaves stops the generation before the lock is let go.
            with contextlib.closing(replies):
                for text, piece_finish in replies:
                    finish_reason = piece_finish or finish_reason
                    # With tools bound, text that may be a call is held back until the reply is complete.
                    ready = hold_index(text) if names else len(text)
                    if ready > shown:
                        yield self._token(text[shown:ready], run_manager)
                        shown = ready
            completion_tokens = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        reply = parse_tool_calls(text[shown:], names, allow_bare=shown == 0)
        if reply.content:
            yield self._token(reply.content, run_manager)
        usage = UsageMetadata(
            input_tokens=len(prompt_tokens),
            output_tokens=completion_tokens,
            total_tokens=len(prompt_tokens) + completion_tokens,
        )
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {
                        "name": call.name,
                        "args": json.dumps(call.args, ensure_ascii=False),
                        "id": f"call_{uuid.uuid4().hex[:24]}",
                        "index": index,
                        "type": "tool_call_chunk",
                    }
                    for index, call in enumerate(reply.tool_calls)
                ],
                usage_metadata=usage,
                response_metadata={
                    "model_name": self.model_name,
                    "model_provider": "llama-cpp",
                    "finish_reason": finish_reason,
                },
                chunk_position="last",
            )
        )

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # Loading and generating block for seconds: both run in worker threads, never on the loop.
        engine = await asyncio.to_thread(self._engine)
        chunks = _in_worker_thread(engine.executor, lambda: self._stream(messages, stop, None, **kwargs))
        async for chunk in chunks:
            if run_manager and chunk.text:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk

    def _completion(
        self,
        llama: LlamaLike,
        prompt_tokens: list[int],
        tools: list[dict[str, Any]],
        tool_choice: Any,
        known_ids: list[str],
        sampling: dict[str, Any],
    ) -> Generator[tuple[str, str | None], None, None]:
        """The reply so far after each piece the model writes, and the piece's finish reason.

        Free text is generated unconstrained. Once the reply opens a tool call (see
        :func:`call_opening`), that generation is stopped and the call is written again from its
        opening tag under a grammar that admits only a valid call of a bound tool (see
        :mod:`playground.models.grammar`); the text before the call is kept. UUID arguments may only be
        ones the conversation holds (``known_ids``). A ``tool_choice`` that demands a call is
        constrained from the first token.
        """
        gbnf = _call_grammar(tools, known_ids) if tools and self.settings.local_tool_grammar else None
        names = [tool["function"]["name"] for tool in tools]
        forced = _forced_tools(tool_choice, tools) if gbnf else None
        forced_gbnf = _call_grammar(forced, known_ids) if forced else None
        if forced_gbnf:
            yield from self._constrained_call(
                llama, prompt_tokens, "", forced_gbnf, self.max_tokens, sampling
            )
            return
        text = ""
        with contextlib.closing(
            llama.create_completion(prompt_tokens, max_tokens=self.max_tokens, **sampling)
        ) as pieces:
            for piece in pieces:
                choice = piece["choices"][0]
                text += choice["text"]
                opening = call_opening(text, names) if gbnf else None
                if opening is not None:
                    break
                yield text, choice.get("finish_reason")
            else:
                return
        # The free generation is closed before the constrained one starts: one at a time on the context.
        used = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        budget = max(1, self.max_tokens - used)
        assert gbnf is not None  # a call opens only where there is a grammar for it
        yield from self._constrained_call(llama, prompt_tokens, text[:opening], gbnf, budget, sampling)

    def _constrained_call(
        self,
        llama: LlamaLike,
        prompt_tokens: list[int],
        before: str,
        gbnf: str,
        max_tokens: int,
        sampling: dict[str, Any],
    ) -> Iterator[tuple[str, str | None]]:
        text = before + OPEN_TAG + "\n"
        continued = prompt_tokens + llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        grammar = import_llama_cpp().LlamaGrammar.from_string(gbnf, verbose=False)
        yield text, None
        pieces = llama.create_completion(continued, max_tokens=max_tokens, grammar=grammar, **sampling)
        with contextlib.closing(pieces) as constrained:
            for piece in constrained:
                choice = piece["choices"][0]
                text += choice["text"]
                yield text, choice.get("finish_reason")

    def _token(self, text: str, run_manager: CallbackManagerForLLMRun | None) -> ChatGenerationChunk:
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
        if run_manager:
            run_manager.on_llm_new_token(text, chunk=chunk)
        return chunk

    def _check_fits(self, prompt_tokens: int, n_ctx: int) -> None:
        # llama.cpp would refuse too, but without saying which setting to change.
        if prompt_tokens >= n_ctx:
            raise ValueError(
                f"the prompt is {prompt_tokens} tokens but the offline model's context window is "
                f"{n_ctx}: raise BEADS_LOCAL_NUM_CTX (the model supports up to 32768) or shorten the prompt"
            )


#: tool rounds since the user's message after which a small model answers in words
MAX_TOOL_ROUNDS = 2
ANSWER_NOW = "Answer the user now, in plain words, from what the tools returned. Do not call a tool."
#: a reply that opens neither a call, a JSON object or list, nor a tag: what "in words" admits
WORDS_GBNF = r"root ::= [^{<\[`\n >] [^{<]*"


def calls_are_spent(messages: Sequence[BaseMessage]) -> bool:
    """Whether this turn's tool use has run its course: the model repeated a call it had already
    made (the same tool with the same arguments cannot tell it anything new), or it has made
    MAX_TOOL_ROUNDS rounds of calls since the user spoke. A 0.5B model under the call grammar
    otherwise keeps calling tools until the agent's call limit ends the turn with no answer."""
    seen: set[str] = set()
    rounds = 0
    for message in reversed(messages):
        if message.type == "human":
            break
        for call in getattr(message, "tool_calls", None) or []:
            key = json.dumps([call.get("name"), call.get("args")], sort_keys=True, default=str)
            if key in seen:
                return True
            seen.add(key)
        rounds += bool(getattr(message, "tool_calls", None))
    return rounds >= MAX_TOOL_ROUNDS


def _call_grammar(tools: list[dict[str, Any]], known_ids: list[str]) -> str | None:
    try:
        return tool_call_gbnf(tools, known_ids)
    except ValueError as e:  # a grammar llama.cpp cannot parse: the calls go unconstrained, as before
        _log.warning("no tool-call grammar: %s", e)
        return None


def _forced_tools(tool_choice: Any, tools: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The tools a call must be made to, when ``tool_choice`` demands a call; None when it does not."""
    if isinstance(tool_choice, dict):
        tool_choice = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
    if tool_choice in ("any", "required", True):
        return tools
    named = [tool for tool in tools if tool["function"]["name"] == tool_choice]
    return named or None


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


async def _in_worker_thread(
    executor: Executor,
    make: Callable[[], Generator[ChatGenerationChunk, None, None]],
) -> AsyncIterator[ChatGenerationChunk]:
    """Run a sync generator on ``executor`` and yield its items here, as they come."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    abandoned = threading.Event()

    def put(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is listening
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        if abandoned.is_set():
            return  # the caller left while this waited for its turn
        try:
            with contextlib.closing(make()) as items:
                for item in items:
                    if abandoned.is_set():
                        return  # closing the generator releases the model's lock
                    put(item)
        except BaseException as e:
            put(_Failure(e))
            return
        put(_DONE)

    loop.run_in_executor(executor, contextvars.copy_context().run, work)
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        abandoned.set()
