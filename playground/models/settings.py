"""Which chat model the agents use, and how it is configured, read from ``BEADS_*`` variables.

``BEADS_MODEL`` names any chat model as a spec (memory.model_spec: ``offline``, ``ollama:<model>``,
``openai:<model>``, ``anthropic:<model>``, any ``provider:model`` LangChain's ``init_chat_model``
builds); unset, ``BEADS_MODEL_BACKEND=auto`` (the default) uses Ollama when a server answers and the
offline model otherwise. ``BEADS_OLLAMA_MODEL`` picks the Ollama model (any tool-calling model that has been pulled),
``BEADS_LOCAL_MODEL`` the offline one (the 0.5B default, or the 1.5B from the ``local15`` extra).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory.model_spec import ModelSpec, parse_model_spec
from memory.settings import APP_NAME

Backend = Literal["auto", "ollama", "local", "scripted"]
#: The offline models (playground.models.weights.LOCAL_MODELS has their files).
LocalModelName = Literal["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
DEFAULT_LOCAL_MODEL: LocalModelName = "qwen2.5-coder-0.5b"

#: Where Ollama listens unless told otherwise, as its own client spells it.
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
_OLLAMA_PORT = 11434

#: Below this Ollama's own default applies, and it silently drops the start of longer prompts.
MIN_NUM_CTX = 2048


def default_model_cache_dir() -> Path:
    # A cache, not data: the weights are rebuilt from the installed packages whenever they are missing.
    return platformdirs.user_cache_path(APP_NAME) / "models"


def normalise_ollama_url(raw: str) -> str:
    """A full URL for an ``OLLAMA_HOST``-style value (``host``, ``host:port``, ``:port`` or a URL).

    The same reading as the ollama client's: a bare host gets Ollama's port, an explicit scheme
    without a port keeps the scheme's.
    """
    value = raw.strip().rstrip("/")
    if not value:
        return DEFAULT_OLLAMA_URL
    bare = "://" not in value
    if bare:
        value = f"http://{value}"
    parts = urlsplit(value)
    host = parts.hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return value  # not something we can take apart; the client will say what is wrong with it
    if port is None and bare:
        port = _OLLAMA_PORT
    netloc = host if port is None else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def _default_openai_url() -> str | None:
    # the openai client's own variable, and the older name langchain-openai still reads
    url = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or ""
    return url.strip() or None


def _default_ollama_url() -> str:
    # OLLAMA_HOST is what the ollama CLI and client honour; respect it when our own variable is unset.
    return normalise_ollama_url(os.environ.get("OLLAMA_HOST", ""))


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BEADS_", env_file=".env", extra="ignore")

    #: A model spec (memory.model_spec); set, it wins over model_backend, ollama_model and local_model.
    model: str | None = None
    model_backend: Backend = "auto"
    #: A 12B-class model that calls tools reliably; any pulled tool-calling model works.
    ollama_model: str = "gemma3:12b"
    ollama_base_url: str = Field(default_factory=_default_ollama_url)
    num_ctx: int = 16384
    #: Where openai:<model> is served: unset, OpenAI itself (or OPENAI_BASE_URL); any
    #: OpenAI-compatible server (vLLM, LM Studio, llama.cpp's server) otherwise.
    openai_base_url: str | None = Field(default_factory=_default_openai_url)
    #: The longest reply a served model (openai:, anthropic:, any provider:model) may write, in
    #: tokens; None: the provider's default.
    max_tokens: int | None = Field(default=None, ge=1)
    reasoning: bool = False
    temperature: float = Field(default=0.2, ge=0.0)
    #: The offline model: the 0.5B default (the `local` extra), or the 1.5B (the `local15` extra),
    #: about three times the weights, and slower.
    local_model: LocalModelName = DEFAULT_LOCAL_MODEL
    local_num_ctx: int = Field(default=4096, ge=512)
    local_threads: int = Field(default=2, ge=1)
    #: Once the offline model opens a tool call, a grammar holds the rest to a bound tool's schema.
    local_tool_grammar: bool = True
    model_cache_dir: Path = Field(default_factory=default_model_cache_dir)

    @field_validator("num_ctx")
    @classmethod
    def _context_big_enough(cls, value: int) -> int:
        if value < MIN_NUM_CTX:
            raise ValueError(
                f"num_ctx must be at least {MIN_NUM_CTX}: agent prompts (system prompt, tools, memory) "
                "outgrow smaller windows, and Ollama drops the overflow without an error"
            )
        return value

    @field_validator("model")
    @classmethod
    def _a_spec(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return str(parse_model_spec(value))  # a wrong spec is refused when the settings are read

    @property
    def spec(self) -> ModelSpec:
        """The model these settings choose, as a spec: `model`, else what `model_backend` means."""
        if self.model is not None:
            return parse_model_spec(self.model)
        if self.model_backend == "ollama":
            return ModelSpec("ollama", self.ollama_model)
        if self.model_backend == "local":
            return ModelSpec("offline", self.local_model)
        return ModelSpec(self.model_backend)

    @field_validator("ollama_base_url")
    @classmethod
    def _full_url(cls, value: str) -> str:
        return normalise_ollama_url(value)
