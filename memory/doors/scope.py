"""Which memory a call works in, resolved per call, so that one compiled agent serves every session.

A run names its session the way LangGraph runs name everything else: in its runtime `context`
(`agent.invoke(..., context={"session_id": "alice"})`, or any object with a `session_id` attribute)
or in `config["configurable"]` (where LangMem's namespace templates read it, so one config serves
both). A run may instead name a namespace outright with `beads_namespace_id`: the sub-agent tool
does so for the fork it runs, because a sub-agent inherits its supervisor's `configurable` and would
otherwise resolve to the supervisor's root. Where the run names nothing, the namespace the
middleware was built with (if any) is the default.

The lookup order, first match wins:
  1. `beads_namespace_id` in the context, then in `configurable`: that namespace;
  2. `session_id` in the context, then in `configurable`: the default namespace if it belongs to
     that session (a fork's middleware keeps its fork), otherwise the session's root;
  3. the default namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langgraph.config import get_config

from memory.errors import ConfigurationError, SessionNotGivenError
from memory.model import Namespace

if TYPE_CHECKING:
    from memory.graph.store import FactStore

SESSION_KEY = "session_id"
NAMESPACE_KEY = "beads_namespace_id"


def _lookup(source: Any, key: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(key)
    return getattr(source, key, None)


def _configurable() -> Mapping[str, Any]:
    try:
        configurable = get_config().get("configurable")
    except RuntimeError:  # outside a runnable: only the default applies
        return {}
    return configurable if isinstance(configurable, Mapping) else {}


def _runtime_context() -> Any:
    """The running graph's context, for callers (tools) that are not handed the runtime."""
    from langgraph.runtime import get_runtime

    try:
        runtime = get_runtime()
    except RuntimeError:  # outside a graph
        return None
    return getattr(runtime, "context", None)


def requested(
    context: Any = None, configurable: Mapping[str, Any] | None = None
) -> tuple[str | None, str | None]:
    """(namespace id, session id) this run asks for, each None when it does not say."""
    if configurable is None:
        configurable = _configurable()
    found: list[str | None] = []
    for key in (NAMESPACE_KEY, SESSION_KEY):
        value = _lookup(context, key)
        if value is None or value == "":
            value = configurable.get(key)
        found.append(None if value is None or value == "" else str(value))
    return found[0], found[1]


class SessionScope:
    """Resolves the namespace of the current call on `store` (see the module docstring)."""

    def __init__(self, store: FactStore, default: Namespace | None = None) -> None:
        self.store = store
        self.default = default

    def resolve(self, context: Any = None, *, use_runtime: bool = True) -> Namespace:
        """The namespace of this call. `context` is the run's runtime context when the caller has it
        (a middleware hook does); otherwise it is looked up from the running graph."""
        if context is None and use_runtime:
            context = _runtime_context()
        ns_id, session_id = requested(context)
        if ns_id is not None:
            if self.default is not None and str(self.default.id) == ns_id:
                return self.default
            try:
                parsed = uuid.UUID(ns_id)
            except ValueError:
                raise ConfigurationError(
                    f"{NAMESPACE_KEY} must be a namespace id (a UUID), not {ns_id!r}"
                ) from None
            return self.store.namespace(parsed)
        if session_id is not None:
            if self.default is not None and self.default.session_id == session_id:
                return self.default
            return self.store.root(session_id)
        if self.default is not None:
            return self.default
        raise SessionNotGivenError()


def as_scope(store: FactStore, where: SessionScope | Namespace | None) -> SessionScope:
    """A scope for `where`: a scope as it is, a namespace as the default of a new one."""
    return where if isinstance(where, SessionScope) else SessionScope(store, where)


__all__ = ["NAMESPACE_KEY", "SESSION_KEY", "SessionScope", "as_scope", "requested"]
