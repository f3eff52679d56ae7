"""Chat models for the lanes: Ollama, the in-process offline default, and the library's scripted double
(memory.scripted, re-exported here for the playground's scripted mode).

:func:`select_chat_model` picks one from :class:`ModelSettings` (``BEADS_*`` variables): Ollama when
a server answers with the configured model pulled, the offline model otherwise.

The names below are imported on first use: importing one submodule (the settings the app reads,
or the tool-call parser in a test, say) should not pay for the Ollama client and the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory.scripted import ScriptedChatModel
    from playground.models.local import LocalChatModel
    from playground.models.ollama import (
        OllamaChatModel,
        explain_ollama_error,
        ollama_chat_model,
        probe_ollama,
    )
    from playground.models.select import ActiveModel, select_chat_model
    from playground.models.settings import ModelSettings
    from playground.models.weights import ensure_weights

_EXPORTS = {
    "ActiveModel": "playground.models.select",
    "LocalChatModel": "playground.models.local",
    "ModelSettings": "playground.models.settings",
    "OllamaChatModel": "playground.models.ollama",
    "ScriptedChatModel": "memory.scripted",
    "ensure_weights": "playground.models.weights",
    "explain_ollama_error": "playground.models.ollama",
    "ollama_chat_model": "playground.models.ollama",
    "probe_ollama": "playground.models.ollama",
    "select_chat_model": "playground.models.select",
}

__all__ = [
    "ActiveModel",
    "LocalChatModel",
    "ModelSettings",
    "OllamaChatModel",
    "ScriptedChatModel",
    "ensure_weights",
    "explain_ollama_error",
    "ollama_chat_model",
    "probe_ollama",
    "select_chat_model",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value
