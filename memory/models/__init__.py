"""Chat models for the lanes: Ollama, the in-process offline default, and a scripted double.

:func:`select_chat_model` picks one from :class:`ModelSettings` (``BEADS_*`` variables): Ollama when
a server answers with the configured model pulled, the offline model otherwise.

The names below are imported on first use: importing one submodule (the scripted double in a test,
say) should not pay for the Ollama client and the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory.models.local import LocalChatModel
    from memory.models.ollama import OllamaChatModel, explain_ollama_error, ollama_chat_model, probe_ollama
    from memory.models.select import ActiveModel, select_chat_model
    from memory.models.settings import ModelSettings
    from memory.models.weights import ensure_weights
    from memory.scripted import ScriptedChatModel

_EXPORTS = {
    "ActiveModel": "memory.models.select",
    "LocalChatModel": "memory.models.local",
    "ModelSettings": "memory.models.settings",
    "OllamaChatModel": "memory.models.ollama",
    "ScriptedChatModel": "memory.scripted",
    "ensure_weights": "memory.models.weights",
    "explain_ollama_error": "memory.models.ollama",
    "ollama_chat_model": "memory.models.ollama",
    "probe_ollama": "memory.models.ollama",
    "select_chat_model": "memory.models.select",
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
