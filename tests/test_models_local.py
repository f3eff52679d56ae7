"""The offline chat model: prompt format, streaming shape, tool calls, weights, and the real model once."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from memory.errors import ModelUnavailableError
from playground.models import weights
from playground.models.chatml import format_prompt
from playground.models.grammar import tool_call_gbnf
from playground.models.local import LocalChatModel
from playground.models.settings import ModelSettings
from playground.models.weights import WeightsSpec, ensure_weights

WEATHER_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny in {city}."


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: streams canned completions, one per call, piece by piece.

    A completion the caller stops reading is remembered: the next call made with a grammar (the
    model asked to write the call it had opened) streams what was left of it, as a model continuing
    from the same text would. Without a leftover, that call takes the next canned completion.
    """

    def __init__(self, *completions: list[str], n_ctx: int = 4096, delay: float = 0.0) -> None:
        self.completions = list(completions)
        self.prompts: list[str] = []
        self.tokenized: list[str] = []
        self.kwargs: list[dict[str, Any]] = []
        self.leftover: list[str] = []
        self._n_ctx = n_ctx
        self.delay = delay
        self.active = 0
        self.overlapped = False

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        decoded = text.decode()
        self.tokenized.append(decoded)
        if decoded.startswith("<|im_start|>"):
            self.prompts.append(decoded)
        return list(range(len(text.split())))  # one "token" per word is plenty for counting

    def n_ctx(self) -> int:
        return self._n_ctx

    def create_completion(self, prompt: list[int], **kwargs: Any) -> Iterator[dict[str, Any]]:
        assert kwargs["stream"] is True
        self.kwargs.append(kwargs)
        if kwargs.get("grammar") is not None and self.leftover:
            pieces, self.leftover = self.leftover, []
        else:
            pieces = self.completions.pop(0) if self.completions else ["OK"]
        self.active += 1
        self.overlapped |= self.active > 1
        read = 0
        try:
            for piece in pieces:
                time.sleep(self.delay)
                yield {"choices": [{"text": piece, "finish_reason": None}]}
                read += 1
            yield {"choices": [{"text": "", "finish_reason": "stop"}]}
        finally:
            if read < len(pieces):
                self.leftover = pieces[read + 1 :]
            self.active -= 1


def model_with(llama: FakeLlama, **kwargs: Any) -> LocalChatModel:
    return LocalChatModel(llama=llama, **kwargs)


async def run_agent(model: LocalChatModel, question: str, **agent_kwargs: Any) -> dict[str, Any]:
    """Streams one agent turn; what arrived, sorted by kind."""
    agent = create_agent(model, tools=[get_weather], **agent_kwargs)
    seen: dict[str, Any] = {"tokens": [], "call_chunks": [], "tool_results": [], "last": []}
    async for mode, data in agent.astream({"messages": [HumanMessage(question)]}, stream_mode=["messages"]):
        assert mode == "messages"
        message, meta = cast(tuple[Any, dict[str, Any]], data)
        if isinstance(message, AIMessageChunk) and meta["langgraph_node"] == "model":
            if message.content:
                seen["tokens"].append(message.content)
            if message.tool_call_chunks:
                seen["call_chunks"].append(message)
            if message.chunk_position == "last":
                seen["last"].append(message)
        elif isinstance(message, ToolMessage):
            seen["tool_results"].append(message.content)
    return seen


async def test_a_tool_call_streams_as_one_final_chunk_through_an_agent() -> None:
    llama = FakeLlama(
        [
            "Let ",
            "me ",
            "check. ",
            "<tool",
            "_call>\n",
            '{"name": "get_weather", ',
            '"arguments": {"city": "Paris"}}',
            "\n</tool_call>",
        ],
        ["It ", "is ", "sunny ", "in ", "Paris."],
    )
    seen = await run_agent(model_with(llama), "What's the weather in Paris?")
    # Text before the call streams as it comes; nothing of the call itself is ever shown as text.
    assert seen["tokens"] == ["Let ", "me ", "check. ", "It ", "is ", "sunny ", "in ", "Paris."]
    [call_chunk] = seen["call_chunks"]
    assert call_chunk.chunk_position == "last"
    [raw] = call_chunk.tool_call_chunks
    assert raw["name"] == "get_weather"
    assert json.loads(raw["args"] or "") == {"city": "Paris"}
    assert raw["index"] == 0
    assert raw["id"] and raw["id"].startswith("call_")
    assert call_chunk.tool_calls[0]["args"] == {"city": "Paris"}
    assert seen["tool_results"] == ["It is sunny in Paris."]
    for last in seen["last"]:
        usage = last.usage_metadata
        assert usage is not None and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    # The second prompt carries the call and its result the way Qwen2.5 was trained on them.
    assert "<tools>" in llama.prompts[0] and '"name": "get_weather"' in llama.prompts[0]
    assert llama.prompts[1].endswith(
        "<|im_start|>assistant\nLet me check. \n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nIt is sunny in Paris.\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_without_the_grammar_a_bare_json_call_is_parsed_and_tokens_counted() -> None:
    llama = FakeLlama(['```json\n{"name": "get_weather", "args": {"city": "Paris"}}\n```'])
    model = model_with(llama, settings=ModelSettings(local_tool_grammar=False))
    reply = model.bind_tools([get_weather]).invoke("Weather in Paris?")
    assert isinstance(reply, AIMessage)
    assert reply.content == ""
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] == 7  # words of the completion, per the fake tokenizer
    assert reply.response_metadata["finish_reason"] == "stop"


def test_json_that_is_not_a_call_is_the_answer() -> None:
    text = '{"name": "Maria", "city": "Lisbon"}'
    reply = model_with(FakeLlama([text])).bind_tools([get_weather]).invoke("Extract.")
    assert reply.content == text
    assert reply.tool_calls == []


def test_without_tools_nothing_is_held_back() -> None:
    pieces = ["{", '"a": ', "1}"]
    chunks = list(model_with(FakeLlama(pieces)).stream("JSON please"))
    assert [c.content for c in chunks[:-1]] == pieces
    assert chunks[-1].chunk_position == "last"


def test_settings_reach_the_sampler() -> None:
    llama = FakeLlama(["x"])
    settings = ModelSettings(temperature=0.7)
    model_with(llama, settings=settings, max_tokens=64, seed=3).invoke("hi", stop=["STOP"])
    [kwargs] = llama.kwargs
    assert kwargs["temperature"] == 0.7
    assert kwargs["max_tokens"] == 64
    assert kwargs["seed"] == 3
    assert kwargs["stop"] == ["<|im_end|>", "STOP"]


def test_a_prompt_longer_than_the_context_says_which_setting_to_change() -> None:
    with pytest.raises(ValueError, match="BEADS_LOCAL_NUM_CTX"):
        model_with(FakeLlama(n_ctx=8)).invoke("one two three four five six seven eight nine ten")


async def test_generation_never_blocks_the_event_loop_and_takes_turns() -> None:
    llama = FakeLlama(["a ", "b ", "c ", "d "], ["e ", "f ", "g ", "h "], delay=0.05)
    model = model_with(llama)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        first, second = await asyncio.gather(model.ainvoke("one"), model.ainvoke("two"))
    finally:
        ticker.cancel()
    assert {first.content, second.content} == {"a b c d ", "e f g h "}
    assert ticks >= 20  # ~0.4 s of generation, and the loop kept running throughout
    assert not llama.overlapped  # one generation at a time on the shared context


def test_threads_take_turns_on_the_shared_context() -> None:
    llama = FakeLlama(*[["x ", "y "] for _ in range(4)], delay=0.02)
    model = model_with(llama)
    threads = [threading.Thread(target=model.invoke, args=("hi",)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(llama.kwargs) == 4
    assert not llama.overlapped


async def test_waiting_generations_leave_the_default_executor_free() -> None:
    # More generations queued than the default executor has threads: the embedder and the database
    # run their blocking calls there, and must not wait behind the model.
    llama = FakeLlama(*[["a ", "b ", "c "] for _ in range(12)], delay=0.05)
    model = model_with(llama)
    generations = asyncio.gather(*(model.ainvoke("hi") for _ in range(12)))
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    await asyncio.to_thread(lambda: None)
    assert time.perf_counter() - started < 0.1
    assert len(await generations) == 12


async def test_an_abandoned_stream_frees_the_model() -> None:
    llama = FakeLlama(["a "] * 50, ["done"], delay=0.01)
    model = model_with(llama)
    async for _ in model.astream("long"):
        break
    reply = await asyncio.wait_for(model.ainvoke("next"), timeout=5)
    assert reply.content == "done"


def test_tool_choice_none_offers_no_tools() -> None:
    llama = FakeLlama([WEATHER_CALL])
    reply = model_with(llama).bind_tools([get_weather], tool_choice="none").invoke("hi")
    assert reply.tool_calls == []


# --- the tool-call grammar --------------------------------------------------------------------------


@tool
def remember(fact: str) -> str:
    """Remember a fact."""
    return "ok"


def grammar_of(kwargs: dict[str, Any]) -> str | None:
    grammar = kwargs.get("grammar")
    return None if grammar is None else grammar._grammar  # the GBNF text llama.cpp is given


def test_a_call_the_model_opens_is_written_again_under_the_grammar() -> None:
    llama = FakeLlama(
        ["Let ", "me ", "check. ", "<tool_call>"],
        ['{"name": "get_weather", "arguments": {"city": "Paris"}}', "\n</tool_call>"],
    )
    model = model_with(llama, max_tokens=100).bind_tools([get_weather, remember])
    chunks = list(model.stream("Weather in Paris?"))
    assert "".join(str(c.content) for c in chunks) == "Let me check. "
    assert [(c["name"], c["args"]) for c in chunks[-1].tool_calls] == [("get_weather", {"city": "Paris"})]
    free, constrained = llama.kwargs
    # The free generation stopped at the tag; the call was written again from the tag, constrained.
    assert grammar_of(free) is None
    assert grammar_of(constrained) == tool_call_gbnf(
        [convert_to_openai_tool(get_weather), convert_to_openai_tool(remember)]
    )
    assert "Let me check. <tool_call>\n" in llama.tokenized  # the continued prompt
    assert constrained["max_tokens"] == 100 - 4  # what the free generation used ("words" here)
    assert (constrained["temperature"], constrained["stop"]) == (free["temperature"], free["stop"])


def test_a_bare_json_call_is_written_again_as_a_tagged_constrained_call() -> None:
    llama = FakeLlama(
        ['{"name": "our_budget", "arguments": {"budget": "1200000"}}'],
        ['{"name": "remember", "arguments": {"fact": "budget 1200000"}}', "\n</tool_call>"],
    )
    reply = model_with(llama).bind_tools([get_weather, remember]).invoke("Our budget is 1.2M.")
    assert reply.content == ""
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("remember", {"fact": "budget 1200000"})]
    assert [grammar_of(k) is not None for k in llama.kwargs] == [False, True]
    assert "<tool_call>\n" in llama.tokenized  # the continued prompt


@pytest.mark.parametrize(
    "text",
    [
        "It is sunny in Paris.",
        '{"name": "Maria", "city": "Lisbon"}',  # JSON whose first key is "name" but is not a call
        "Use `<tool>` tags.",
    ],
)
def test_free_text_is_never_constrained(text: str) -> None:
    llama = FakeLlama([text])
    reply = model_with(llama).bind_tools([get_weather]).invoke("hi")
    assert reply.content == text
    assert reply.tool_calls == []
    [kwargs] = llama.kwargs
    assert grammar_of(kwargs) is None


def test_tool_choice_naming_a_tool_constrains_from_the_first_token() -> None:
    llama = FakeLlama(['{"name": "remember", "arguments": {"fact": "likes tea"}}', "\n</tool_call>"])
    reply = model_with(llama).bind_tools([get_weather, remember], tool_choice="remember").invoke("I like tea")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("remember", {"fact": "likes tea"})]
    [kwargs] = llama.kwargs
    assert grammar_of(kwargs) == tool_call_gbnf([convert_to_openai_tool(remember)])
    assert "<tool_call>\n" in llama.tokenized  # the continued prompt
    assert "You must answer by calling the function remember." in llama.prompts[0]


def test_tool_choice_any_constrains_to_every_bound_tool() -> None:
    llama = FakeLlama([WEATHER_CALL.removeprefix("<tool_call>\n")])
    reply = model_with(llama).bind_tools([get_weather, remember], tool_choice="any").invoke("Paris?")
    assert [c["name"] for c in reply.tool_calls] == ["get_weather"]
    [kwargs] = llama.kwargs
    assert grammar_of(kwargs) == tool_call_gbnf([convert_to_openai_tool(t) for t in (get_weather, remember)])


def test_uuids_the_conversation_holds_are_the_ones_a_call_may_use() -> None:
    memory_id = "3f2b8c1e-9a4d-4e7f-b6c5-1d2e3f4a5b6c"
    llama = FakeLlama([WEATHER_CALL])
    messages = [
        HumanMessage("Remember my budget."),
        AIMessage(
            "", tool_calls=[{"name": "remember", "args": {"fact": "1.2M"}, "id": "1", "type": "tool_call"}]
        ),
        ToolMessage(f"created memory {memory_id}", tool_call_id="1"),
        HumanMessage("It is 1.5M now."),
    ]
    model_with(llama).bind_tools([get_weather, remember]).invoke(messages)
    tools = [convert_to_openai_tool(t) for t in (get_weather, remember)]
    assert grammar_of(llama.kwargs[1]) == tool_call_gbnf(tools, [memory_id])


def test_tools_without_a_grammar_are_called_unconstrained() -> None:
    odd = {"type": "function", "function": {"name": 'say "hi"', "description": "x", "parameters": {}}}
    llama = FakeLlama(['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'])
    reply = model_with(llama).bind_tools([get_weather, odd]).invoke("Paris?")
    assert [c["name"] for c in reply.tool_calls] == ["get_weather"]
    [kwargs] = llama.kwargs
    assert grammar_of(kwargs) is None


def test_with_the_grammar_off_nothing_is_constrained() -> None:
    llama = FakeLlama([WEATHER_CALL])
    model = model_with(llama, settings=ModelSettings(local_tool_grammar=False))
    reply = model.bind_tools([get_weather], tool_choice="get_weather").invoke("Paris?")
    assert [c["name"] for c in reply.tool_calls] == ["get_weather"]
    [kwargs] = llama.kwargs
    assert grammar_of(kwargs) is None


def test_prompt_format() -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}},
        }
    ]
    messages = [
        SystemMessage("Be brief."),
        HumanMessage("Weather in Paris and Rome?"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "1", "type": "tool_call"},
                {"name": "get_weather", "args": {"city": "Rome"}, "id": "2", "type": "tool_call"},
            ],
        ),
        ToolMessage("sunny", tool_call_id="1"),
        ToolMessage("rain", tool_call_id="2"),
    ]
    prompt = format_prompt(messages, tools, instruction="You must answer with a function call.")
    assert prompt == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the "
        "user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(tools[0])
        + "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n\n'
        "You must answer with a function call.<|im_end|>\n"
        "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n"
        "<tool_response>\nrain\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert format_prompt([HumanMessage("hi")]).startswith("<|im_start|>system\nYou are Qwen")


# --- weights ----------------------------------------------------------------------------------------


@pytest.fixture
def tiny_parts(tmp_path: Path) -> tuple[list[Path], WeightsSpec]:
    chunks = [b"GGUF" + b"a" * 100, b"b" * 57, b"c" * 3]
    parts = []
    for i, data in enumerate(chunks):
        part = tmp_path / "parts" / f"part{i}.bin"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(data)
        parts.append(part)
    whole = b"".join(chunks)
    return parts, WeightsSpec("tiny.gguf", hashlib.sha256(whole).hexdigest(), len(whole))


def test_weights_are_assembled_once_and_then_trusted(
    tmp_path: Path, tiny_parts: tuple[list[Path], WeightsSpec], monkeypatch: pytest.MonkeyPatch
) -> None:
    parts, spec = tiny_parts
    cache = tmp_path / "cache"
    path = ensure_weights(cache, spec, parts)
    assert path == cache / "tiny.gguf"
    assert path.read_bytes() == b"".join(p.read_bytes() for p in parts)
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.lock", "tiny.gguf.verified"]

    def no_hashing(*args: Any) -> Any:
        raise AssertionError("a verified file must not be read again")

    with monkeypatch.context() as patch:
        patch.setattr(weights, "_sha256_of", no_hashing)
        patch.setattr(weights, "_assemble", no_hashing)
        assert ensure_weights(cache, spec, parts) == path

    # A file that changed since it was verified is checked again, and rebuilt when it is wrong.
    path.write_bytes(b"X" * spec.size)
    os.utime(path, ns=(1, 1))
    assert ensure_weights(cache, spec, parts) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256


def test_weights_that_do_not_match_are_refused(
    tmp_path: Path, tiny_parts: tuple[list[Path], WeightsSpec]
) -> None:
    parts, spec = tiny_parts
    wrong = WeightsSpec(spec.filename, "0" * 64, spec.size)
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailableError) as caught:
        ensure_weights(cache, wrong, parts)
    message = str(caught.value)
    assert f"expected sha256 {'0' * 64}" in message
    assert f"got sha256 {spec.sha256}" in message
    assert [p.name for p in cache.iterdir()] == ["tiny.gguf.lock"]  # no model, no leftover temp file

    with pytest.raises(ModelUnavailableError, match=f"add up to {spec.size} bytes, expected {spec.size + 1}"):
        ensure_weights(cache, WeightsSpec(spec.filename, spec.sha256, spec.size + 1), parts)
    with pytest.raises(ModelUnavailableError, match="missing"):
        ensure_weights(cache, spec, [*parts, tmp_path / "nope.bin"])


def test_two_threads_assemble_once(tmp_path: Path, tiny_parts: tuple[list[Path], WeightsSpec]) -> None:
    parts, spec = tiny_parts
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(ensure_weights(tmp_path, spec, parts)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len(set(results)) == 1
    assert hashlib.sha256(results[0].read_bytes()).hexdigest() == spec.sha256


def test_two_processes_assemble_once(tmp_path: Path, tiny_parts: tuple[list[Path], WeightsSpec]) -> None:
    parts, spec = tiny_parts
    script = (
        "import sys, json; from pathlib import Path\n"
        "from playground.models.weights import WeightsSpec, ensure_weights\n"
        "args = json.loads(sys.argv[1])\n"
        "print(ensure_weights(Path(args['cache']), WeightsSpec(*args['spec']), [Path(p) for p in args['parts']]))\n"
    )
    payload = json.dumps(
        {
            "cache": str(tmp_path / "cache"),
            "spec": [spec.filename, spec.sha256, spec.size],
            "parts": [str(p) for p in parts],
        }
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", script, payload], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=120)[0].strip() for w in workers]
    assert [w.returncode for w in workers] == [0, 0]
    assert outputs == [str(tmp_path / "cache" / spec.filename)] * 2
    assert hashlib.sha256(Path(outputs[0]).read_bytes()).hexdigest() == spec.sha256


# --- the real model -----------------------------------------------------------------------------------


@pytest.mark.model
async def test_the_real_offline_model_streams_and_calls_tools() -> None:
    """The packaged Qwen2.5-Coder-0.5B in-process, with greedy decoding so that runs repeat.

    Each agent run is capped at one model call: the 0.5B model tends to call a tool again and again
    after its result comes back, and that loop is not what is under test here.
    """
    started = time.perf_counter()
    model = LocalChatModel(temperature=0.0, seed=0, max_tokens=48)
    await asyncio.to_thread(model.load)  # assembles the weights on a fresh machine

    def one_call() -> list[Any]:
        return [ModelCallLimitMiddleware(run_limit=1, exit_behavior="end")]

    # A plain answer, with tools bound, streams token by token.
    seen = await run_agent(model, "What is 2 + 2? Answer in words.", middleware=one_call())
    assert len(seen["tokens"]) >= 2, seen
    assert "4" in "".join(seen["tokens"]) or "four" in "".join(seen["tokens"]).lower()
    [last] = seen["last"]
    assert last.usage_metadata["input_tokens"] > 100  # the tools section is in the prompt
    assert last.usage_metadata["output_tokens"] >= len(seen["tokens"]) - 1

    # The model's own tool-call text becomes a real call, which the agent runs.
    seen = await run_agent(
        model,
        f"Reply with exactly the following text and nothing else:\n{WEATHER_CALL}",
        middleware=one_call(),
    )
    [call_chunk] = seen["call_chunks"]
    assert [(c["name"], c["args"]) for c in call_chunk.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert seen["tool_results"] == ["It is sunny in Paris."]
    assert not any("<tool_call>" in token for token in seen["tokens"])

    # Asked in plain words: when the model decides to call the tool, the call is well formed.
    seen = await run_agent(model, "What's the weather in Paris? Use the tool.", middleware=one_call())
    for chunk in seen["call_chunks"]:
        for call in chunk.tool_calls:
            assert call["name"] == "get_weather"
            assert call["args"]["city"].lower() == "paris"
    assert time.perf_counter() - started < 120


@pytest.mark.model
def test_the_real_offline_model_calls_the_stock_lanes_tools_validly() -> None:
    """LangMem's manage_memory and search_memory bound as the stock lane binds them: each call the
    model makes names a bound tool and passes that tool's own argument schema, and LangMem stores
    the memory (before the grammar, the model wrote ids such as "new_apartment_budget" instead of a
    UUID, and nothing was stored)."""
    from langgraph.store.memory import InMemoryStore
    from langmem import create_manage_memory_tool

    from playground.comparison.lanes import CORE_SYSTEM_PROMPT, STOCK_MEMORY_PROMPT, stock_tools
    from playground.comparison.websearch import web_search_tool

    model = LocalChatModel(temperature=0.0, seed=0, max_tokens=64)
    tools = {t.name: t for t in stock_tools(model, [web_search_tool()])}
    system = SystemMessage(f"{CORE_SYSTEM_PROMPT}\n\n{STOCK_MEMORY_PROMPT}")
    asks = [
        ("Our budget for the new apartment is 1,200,000 euros. Please remember that.", None),
        ("What was our budget again?", "search_memory"),  # a demanded call: constrained from the start
    ]
    made = []
    for ask, choice in asks:
        reply = model.bind_tools(list(tools.values()), tool_choice=choice).invoke([system, HumanMessage(ask)])
        assert reply.tool_calls, reply.content
        for call in reply.tool_calls:
            assert call["name"] in tools
            tools[call["name"]].tool_call_schema.model_validate(call["args"])  # type: ignore[union-attr]
            made.append(call)
    assert made[-1]["name"] == "search_memory"
    [remembered] = [call for call in made if call["name"] == "manage_memory"]
    store = InMemoryStore()
    create_manage_memory_tool(namespace=("test",), store=store).invoke(remembered["args"])
    assert len(store.search(("test",))) == 1


def test_a_turns_tool_calls_are_spent_after_a_repeat_or_two_rounds() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from playground.models.local import calls_are_spent

    def call(name: str, n: int, **args: object) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}])

    asked = [HumanMessage("What is our budget?")]
    assert not calls_are_spent(asked)
    one = [*asked, call("search", 1, q="budget"), ToolMessage("r", tool_call_id="c1")]
    assert not calls_are_spent(one)
    repeat = [*one, call("search", 2, q="budget"), ToolMessage("r", tool_call_id="c2")]
    assert calls_are_spent(repeat)
    two = [*one, call("lookup", 2, q="x"), ToolMessage("r", tool_call_id="c2")]
    assert calls_are_spent(two)
    # a new user message starts a new turn
    assert not calls_are_spent([*two, HumanMessage("And now?")])
