"""LangChain messages as a Qwen2.5 ChatML prompt, the way the model's own chat template writes them.

Written out here rather than rendered from the GGUF's Jinja template so that LangChain's message
types (tool calls on AI messages, tool results, content blocks) map onto the template exactly, and so
the prompt can be tested without loading the model. The text mirrors Qwen2.5's template: tools go
into the first system turn as a ``# Tools`` section, tool results go back as ``<tool_response>``
blocks in a user turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

_TOOLS_HEADER = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def format_prompt(
    messages: Sequence[BaseMessage],
    tools: Sequence[dict[str, Any]] = (),
    *,
    instruction: str | None = None,
) -> str:
    """The full prompt, ending with the opening of the assistant's turn.

    ``instruction`` is appended to the tools section (see :func:`tool_choice_instruction`).
    """
    messages = list(messages)
    first_system = ""
    if messages and isinstance(messages[0], SystemMessage):
        first_system = text_of(messages[0])
        messages = messages[1:]
    system = first_system or DEFAULT_SYSTEM
    if tools:
        system += _TOOLS_HEADER
        for tool in tools:
            system += "\n" + json.dumps(tool, ensure_ascii=False)
        system += _TOOLS_FOOTER
    if instruction:
        # The model has no way to be forced; saying so in the prompt is the next best thing.
        system += f"\n\n{instruction}"
    parts = [_turn("system", system)]
    pending_results: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            pending_results.append(f"\n<tool_response>\n{text_of(message)}\n</tool_response>")
            continue
        if pending_results:
            parts.append(_results_turn(pending_results))
            pending_results = []
        parts.append(_message_turn(message))
    if pending_results:
        parts.append(_results_turn(pending_results))
    parts.append(f"{IM_START}assistant\n")
    return "".join(parts)


def tool_choice_instruction(tool_choice: Any, tool_names: Sequence[str]) -> str | None:
    """A sentence asking for a tool call, for the ``tool_choice`` values that demand one."""
    if isinstance(tool_choice, dict):
        tool_choice = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
    if tool_choice in ("any", "required", True):
        return "You must answer with a function call."
    if isinstance(tool_choice, str) and tool_choice in tool_names:
        return f"You must answer by calling the function {tool_choice}."
    return None


def text_of(message: BaseMessage) -> str:
    """The text of a message; non-text content blocks (images, say) are left out."""
    content = message.content
    if isinstance(content, str):
        return content
    pieces = []
    for block in content:
        if isinstance(block, str):
            pieces.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            pieces.append(str(block.get("text", "")))
    return "".join(pieces)


def _turn(role: str, text: str) -> str:
    return f"{IM_START}{role}\n{text}{IM_END}\n"


def _results_turn(results: list[str]) -> str:
    return f"{IM_START}user{''.join(results)}{IM_END}\n"


def _message_turn(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return _turn("user", text_of(message))
    if isinstance(message, SystemMessage):
        return _turn("system", text_of(message))
    if isinstance(message, AIMessage):
        if not message.tool_calls:
            return _turn("assistant", text_of(message))
        text = f"{IM_START}assistant"
        if content := text_of(message):
            text += "\n" + content
        for call in message.tool_calls:
            arguments = json.dumps(call["args"], ensure_ascii=False)
            text += f'\n<tool_call>\n{{"name": "{call["name"]}", "arguments": {arguments}}}\n</tool_call>'
        return text + f"{IM_END}\n"
    if isinstance(message, ChatMessage):
        return _turn(message.role, text_of(message))
    return _turn("user", text_of(message))
