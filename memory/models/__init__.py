"""Chat models for the lanes: Ollama, the in-process offline default, and a scripted double."""

from __future__ import annotations

from memory.models.scripted import ScriptedChatModel

__all__ = ["ScriptedChatModel"]
