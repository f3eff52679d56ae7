"""Which chat model a spec names: one reading for every place a model is chosen (the playground, the
evaluation harness's reader and judge, the chats and scenario benches, the smoke gate).

A spec is ``provider:model``, or one of the names that stand alone:

- ``auto``: Ollama when a server answers with the configured model pulled, else ``offline``
  (the playground's default);
- ``offline`` (or ``local``): the bundled in-process model; ``offline:qwen2.5-coder-1.5b`` the larger one;
- ``scripted``: the deterministic double, no model at all;
- ``ollama:<model>``: a model pulled on an Ollama server;
- ``openai:<model>``: OpenAI, or any OpenAI-compatible server (vLLM, LM Studio, llama.cpp's server)
  at ``OPENAI_BASE_URL`` or the caller's base-URL setting;
- ``anthropic:<model>``;
- any other ``provider:model`` that LangChain's ``init_chat_model`` builds (``groq:...``,
  ``google_genai:...``, ``bedrock_converse:...``), with that provider's package installed.

Parsing loads nothing; building a model from a spec is the caller's (``playground.models.select``),
since the offline model lives with the playground.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from memory.errors import ConfigurationError, ModelKeyMissingError

#: the specs that need no model name
STANDALONE = ("auto", "offline", "scripted")
_ALIASES = {"local": "offline"}
#: providers whose LangChain package comes with an extra of ours: provider -> (extra, module)
PROVIDER_EXTRAS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "langchain_openai"),
    "anthropic": ("anthropic", "langchain_anthropic"),
}
#: the variable holding each hosted provider's key, for a message before the first call
KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
    "together": "TOGETHER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
}
_PROVIDER = re.compile(r"[a-z][a-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed spec: `provider` ("offline", "ollama", "openai", ...) and `model` ("" where none is named)."""

    provider: str
    model: str = ""

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def hosted(self) -> bool:
        """Whether the model runs on someone's server (not in this process, not the scripted double)."""
        return self.provider not in STANDALONE


def parse_model_spec(spec: str) -> ModelSpec:
    """`spec` read as a :class:`ModelSpec`; a ConfigurationError saying what a spec looks like otherwise."""
    text = spec.strip()
    provider, colon, model = text.partition(":")
    provider = _ALIASES.get(provider.lower(), provider.lower())
    model = model.strip()
    if provider in ("auto", "scripted"):
        if not model:
            return ModelSpec(provider)
    elif provider == "offline" or (colon and model and _PROVIDER.fullmatch(provider)):
        return ModelSpec(provider, model)
    raise ConfigurationError(
        f"{spec!r} is not a model spec: use offline, scripted, auto, ollama:<model>, openai:<model> "
        "(OPENAI_BASE_URL for any OpenAI-compatible server), anthropic:<model>, or any provider:model "
        "that LangChain's init_chat_model knows"
    )


def missing_key(spec: ModelSpec, *, base_url: str | None = None) -> ModelKeyMissingError | None:
    """The error for a hosted provider whose key is not set, or None (an OpenAI-compatible server at
    `base_url` needs no OpenAI key: most local ones ignore it)."""
    variable = KEY_VARIABLES.get(spec.provider)
    if variable is None or os.environ.get(variable, "").strip():
        return None
    if spec.provider == "openai" and base_url:
        return None
    hint = (
        " (or set OPENAI_BASE_URL to an OpenAI-compatible server, which needs no key)"
        if spec.provider == "openai"
        else ""
    )
    return ModelKeyMissingError(f"{spec} needs an API key: set {variable}{hint}")


__all__ = ["KEY_VARIABLES", "PROVIDER_EXTRAS", "STANDALONE", "ModelSpec", "missing_key", "parse_model_spec"]
