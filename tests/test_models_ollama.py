"""The Ollama chat model against loopback stand-ins: clear failures, and what goes over the wire."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from ollama_fakes import MODEL, FakeOllama, chunk, done

from memory.errors import ModelUnavailableError
from playground.models.ollama import OllamaChatModel, explain_ollama_error, ollama_chat_model, probe_ollama
from playground.models.settings import ModelSettings


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny in {city}."


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port on which nothing listens: bound (so nobody else takes it) but not listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def settings_for(url: str) -> ModelSettings:
    return ModelSettings(ollama_base_url=url, ollama_model=MODEL, num_ctx=12288)


def test_no_server_through_an_agent_says_to_start_ollama(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    agent = create_agent(ollama_chat_model(settings_for(url)), tools=[get_weather])
    with pytest.raises(ModelUnavailableError) as caught:
        agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    message = str(caught.value)
    assert message.startswith(f"Ollama is not reachable at {url}: start it with `ollama serve`")


async def test_no_server_through_an_agent_stream_says_to_start_ollama(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    agent = create_agent(ollama_chat_model(settings_for(url)), tools=[get_weather])
    with pytest.raises(ModelUnavailableError, match="ollama serve") as caught:
        async for _ in agent.astream(
            {"messages": [HumanMessage("What's the weather in Paris?")]}, stream_mode=["messages", "updates"]
        ):
            pass
    assert f"Ollama is not reachable at {url}" in str(caught.value)


@pytest.mark.parametrize("call", ["invoke", "stream", "ainvoke", "astream"])
async def test_no_server_on_every_call_path(closed_port: int, call: str) -> None:
    model = ollama_chat_model(settings_for(f"http://127.0.0.1:{closed_port}"))
    with pytest.raises(ModelUnavailableError, match="Ollama is not reachable"):
        if call == "invoke":
            model.invoke("hi")
        elif call == "stream":
            list(model.stream("hi"))
        elif call == "ainvoke":
            await model.ainvoke("hi")
        else:
            async for _ in model.astream("hi"):
                pass


def test_missing_model_says_to_pull_it() -> None:
    with FakeOllama(error=f"model '{MODEL}' not found") as server:
        agent = create_agent(ollama_chat_model(settings_for(server.url)), tools=[get_weather])
        with pytest.raises(ModelUnavailableError) as caught:
            agent.invoke({"messages": [HumanMessage("hi")]})
    message = str(caught.value)
    assert f"run `ollama pull {MODEL}`" in message
    assert "not found" in message


async def test_missing_model_says_to_pull_it_when_streaming() -> None:
    with FakeOllama(error=f"model '{MODEL}' not found") as server:
        model = ollama_chat_model(settings_for(server.url))
        with pytest.raises(ModelUnavailableError, match=f"ollama pull {MODEL}"):
            async for _ in model.astream("hi"):
                pass


async def test_streams_through_an_agent_with_the_context_window_set() -> None:
    replies = [
        [chunk(tool_calls=[{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]), done()],
        [chunk("It is "), chunk("sunny "), chunk("in Paris."), done(40, 5)],
    ]
    with FakeOllama(replies) as server:
        settings = settings_for(server.url)
        agent = create_agent(ollama_chat_model(settings), tools=[get_weather])
        tokens: list[str] = []
        tool_results: list[str] = []
        async for mode, data in agent.astream(
            {"messages": [HumanMessage("What's the weather in Paris?")]}, stream_mode=["messages"]
        ):
            assert mode == "messages"
            message, meta = cast(tuple[Any, dict[str, Any]], data)
            if isinstance(message, AIMessageChunk) and message.content and meta["langgraph_node"] == "model":
                tokens.append(str(message.content))
            if isinstance(message, ToolMessage):
                tool_results.append(str(message.content))
    assert tokens == ["It is ", "sunny ", "in Paris."]
    assert tool_results == ["It is sunny in Paris."]
    assert len(server.requests) == 2
    for body in server.requests:
        # Without num_ctx Ollama silently cuts prompts at its default window.
        assert body["options"]["num_ctx"] == settings.num_ctx == 12288
        assert body["think"] is False
        assert body["model"] == MODEL
    assert [m["role"] for m in server.requests[1]["messages"]] == ["user", "assistant", "tool"]


def test_reasoning_is_sent_as_think_when_asked_for() -> None:
    with FakeOllama() as server:
        settings = ModelSettings(ollama_base_url=server.url, ollama_model=MODEL, reasoning=True)
        assert ollama_chat_model(settings).invoke("hi").content == "OK"
    assert server.requests[0]["think"] is True
    assert server.requests[0]["options"]["num_ctx"] == settings.num_ctx


def test_probe(closed_port: int) -> None:
    assert probe_ollama(f"http://127.0.0.1:{closed_port}") is False
    with FakeOllama() as server:
        assert probe_ollama(server.url) is True
        assert probe_ollama(server.url + "/not-ollama") is False  # answers, but not like Ollama


def test_explain_leaves_other_errors_alone() -> None:
    assert explain_ollama_error(KeyError("x"), MODEL, "http://h:1") is None
    explained = explain_ollama_error(ConnectionError("refused"), MODEL, "http://h:1")
    assert isinstance(explained, ModelUnavailableError)
    assert "http://h:1" in str(explained)


def test_the_factory_builds_the_translating_model() -> None:
    model = ollama_chat_model(
        ModelSettings(ollama_base_url="http://127.0.0.1:1", ollama_model=MODEL, num_ctx=8192)
    )
    assert isinstance(model, OllamaChatModel)
    assert model.num_ctx == 8192
    assert model.reasoning is False
    assert model.validate_model_on_init is False
