"""The library's exceptions: one root, narrow subclasses whose docstring is the message.

Driver errors (psycopg) propagate unwrapped unless wrapping adds meaning.
"""

from __future__ import annotations


class BeadsMemoryError(Exception):
    """Something went wrong in langgraph-beads-memory."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(BeadsMemoryError):
    """The memory layer is misconfigured."""


class NoDatabaseError(ConfigurationError):
    """No database was given: pass a URL to open_pool(url) or set DATABASE_URL, or start the embedded
    Postgres with open_pool(start_embedded()) (from memory import start_embedded; it needs
    pip install 'langgraph-beads-memory[embedded]')."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or " ".join((self.__doc__ or "").split()))


class SessionNotGivenError(ConfigurationError):
    """This call does not say whose memory it uses: run the agent with context={"session_id": ...}
    or config={"configurable": {"session_id": ...}}, or build the middleware with a namespace
    (BeadsMemoryMiddleware(store, store.root("my-session")))."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or " ".join((self.__doc__ or "").split()))


class ModelCannotBindToolsError(ConfigurationError):
    """The agent's chat model cannot bind tools, and the agent offers it some: build the middleware
    with BeadsMemoryMiddleware(store, bind_tools=False) (capture, corrections and recall work without
    the memory tools), or use a chat model that supports tool calling (in tests,
    memory.testing.ScriptedChatModel)."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or " ".join((self.__doc__ or "").split()))


class ModelKeyMissingError(ConfigurationError):
    """The chosen hosted chat model needs an API key that is not set."""


class MissingExtraError(BeadsMemoryError, ImportError):
    """An optional part of the library is not installed; the message names the extra that installs it."""


class SchemaMissingError(ConfigurationError):
    """This database has no memory tables yet: run store.setup() once (it applies the migrations and
    is safe to run at every start)."""


class DatabaseUnavailableError(BeadsMemoryError):
    """The database could not be reached or started."""


class EmbedderUnavailableError(BeadsMemoryError):
    """The embedding model could not be loaded or reached."""


class ModelUnavailableError(BeadsMemoryError):
    """The chat model could not be loaded or reached."""


class SupersedeRefusedError(BeadsMemoryError):
    """A fact may only supersede a fact it is semantically close to."""


class CycleError(BeadsMemoryError):
    """The edge would create a cycle in the supersedes graph."""


class FactNotFoundError(BeadsMemoryError):
    """No fact with that id exists in this session."""


class InvalidCursorError(BeadsMemoryError, ValueError):
    """That page cursor was not handed out by a listing: start again without one."""


class InvalidTextError(BeadsMemoryError, ValueError):
    """Text that Postgres cannot store as sent (a NUL character, a lone surrogate), where nothing may
    be cleaned out of it silently: a stored value must come back as it was put."""


class NamespaceNotFoundError(BeadsMemoryError):
    """No namespace with that id exists."""


class UntrustedWriteError(BeadsMemoryError):
    """Untrusted content (a tool result or a web page) may not write that."""
