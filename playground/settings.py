"""The playground's settings: one class, read from ``PLAYGROUND_*`` variables, refusing unsafe values.

The database and the chat model follow the library's own settings unless overridden here:
``DATABASE_URL`` (else the embedded Postgres), ``BEADS_MODEL`` (any model spec: offline,
ollama:<model>, openai:<model>, anthropic:<model>, provider:model), ``BEADS_MODEL_BACKEND`` (auto,
ollama, local, scripted) and ``BEADS_LOCAL_MODEL`` (which offline model).
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memory.doors.keys import MIN_KEY_BITS, MIN_KEY_CHARS, key_problem
from memory.model_spec import parse_model_spec
from playground.models.settings import LocalModelName

#: A message longer than this is refused whatever the settings say: one message is not a document.
MAX_MESSAGE_CHARS_CEILING = 100_000
#: The shortest API key accepted, and its least estimated strength (memory.doors.keys)
MIN_API_KEY_CHARS = MIN_KEY_CHARS
MIN_API_KEY_BITS = MIN_KEY_BITS
#: connections a process holds outside its pools: the LISTEN connection, the turn worker's liveness
#: lock and the periodic jobs' leader lock
DEDICATED_CONNECTIONS = 3


class PlaygroundSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PLAYGROUND_", env_file=".env", extra="ignore")

    #: Overrides DATABASE_URL for the playground only; unset, the library decides (DATABASE_URL or embedded).
    database_url: str | None = None
    #: The embedder both lanes use: minilm (offline default), ollama[:MODEL], fake[-DIMS].
    embedder: str = "minilm"
    #: Overrides BEADS_MODEL for the playground only: a model spec (memory.model_spec), e.g.
    #: openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:qwen3:8b, offline.
    model: str | None = None
    #: Overrides BEADS_MODEL_BACKEND for the playground only.
    model_backend: Literal["auto", "ollama", "local", "scripted"] | None = None
    #: Overrides BEADS_LOCAL_MODEL for the playground only: the offline model, when the backend is
    #: local (or auto with no Ollama): qwen2.5-coder-0.5b, or qwen2.5-coder-1.5b (the local15 extra).
    local_model: LocalModelName | None = None
    #: The scripted model waits this long per token, so streaming is visible (and a test can stop it mid-reply).
    scripted_token_delay_ms: int = Field(default=0, ge=0, le=5_000)

    #: Longest message accepted, in characters (a longer one gets a 422 and nothing is stored).
    max_message_chars: int = Field(default=8_000)
    #: Turns run at once across all chats (each runs both lanes concurrently; one turn per chat at a time).
    workers: int = Field(default=4, ge=1, le=32)
    #: A running turn's lease; a worker renews it every third of this, and a lapsed lease is reclaimed.
    lease_seconds: float = Field(default=30.0, ge=2.0, le=3_600.0)
    #: A turn that has been claimed this many times without finishing is given up (its lanes show an error).
    max_attempts: int = Field(default=3, ge=1, le=10)
    #: Tokens are written to the event log in batches, at most this far apart.
    token_flush_ms: int = Field(default=50, ge=5, le=1_000)
    #: How often an idle worker looks for turns when no notification arrives.
    poll_seconds: float = Field(default=1.0, ge=0.05, le=60.0)
    #: How long a request waits for a database connection before it answers 503 (the database is down,
    #: or every connection is busy).
    database_wait_seconds: float = Field(default=30.0, ge=0.5, le=300.0)

    #: Connections per process: the app's pool (the playground's tables and the checkpointer; unset:
    #: 8 + 3 per worker), the fact graph's, the stock store's. Each process also holds
    #: DEDICATED_CONNECTIONS of its own (LISTEN, the worker's liveness lock, the leader lock).
    pool_size: int | None = Field(default=None, ge=2, le=500)
    facts_pool_size: int = Field(default=8, ge=1, le=500)
    stock_pool_size: int = Field(default=4, ge=1, le=500)
    #: How many app processes share the database (uvicorn --workers N, or separate processes): at
    #: startup, that many times this process's connections must fit the server's max_connections.
    processes: int = Field(default=1, ge=1, le=1_000)

    #: SSE: a keepalive comment this often, the reconnect delay suggested to browsers, and how many
    #: wake-ups a slow subscriber may have pending (data always comes from the log, so none is lost).
    sse_ping_seconds: int = Field(default=15, ge=1, le=300)
    sse_retry_ms: int = Field(default=2_000, ge=100, le=60_000)
    sse_queue_size: int = Field(default=64, ge=1, le=10_000)

    #: Background consolidation of each chat's fact graph (merge restated facts, and expire unused ones
    #: when a horizon is set) runs this often, in minutes, only for chats with no turn queued or
    #: running; 0 turns it off.
    consolidate_every: float = Field(default=10.0, ge=0.0, le=10_080.0)
    #: Archive facts neither created nor retrieved for this many days; 0 leaves expiry off.
    consolidate_horizon_days: float = Field(default=0.0, ge=0.0, le=3_650.0)

    #: Our lane's memory: inject recalled facts on every call (always), only once the history no longer
    #: fits the model's view (gated), or never; capture messages as they arrive (eager) or where they
    #: leave the view, at sub-agent forks and at the end of the thread (evict).
    injection: Literal["always", "gated", "never"] = "always"
    capture: Literal["eager", "evict"] = "eager"
    #: Capture supersedes a user's earlier claim that a new one corrects (memory.graph.supersession); off, only
    #: the agent's remember_fact corrects.
    auto_supersede: bool = True

    #: Offer our lane's model the memory tools (remember_fact, pin_fact, recall_from_subagents): auto
    #: binds them for every model but the offline one, which called them instead of answering (our lane
    #: captures, corrects and recalls without them; the stock lane cannot remember without its tools).
    memory_tools: Literal["auto", "on", "off"] = "auto"

    #: The key to the whole app (playground.access): with it set, every /api/ route asks for
    #: `Authorization: Bearer <key>` and the pages for a login (the form at /login); unset,
    #: pages and API answer only a request that came in on a loopback address through no proxy, and
    #: refuse (403) any other. One key opens every session: it is for one trusted user or backend.
    api_key: SecretStr | None = None
    #: Host names the app answers to besides localhost, 127.0.0.1, [::1] and the address a request
    #: came in on, comma-separated ("playground.example.com,.internal.example": a leading dot allows
    #: every subdomain). Any other Host header is refused (400): a page that rebinds its own name to
    #: this machine's address cannot reach the app.
    allowed_hosts: str = ""
    #: How many times in a minute one client may send one wrong key (API bearer, login form) before
    #: that key is refused from it (429) for the rest of the minute; the right key is never refused.
    auth_failures_per_minute: int = Field(default=10, ge=1, le=10_000)
    #: How long a login lasts, in hours (a server-side row: logging out, or a key change, ends it sooner).
    login_hours: float = Field(default=12.0, gt=0.0, le=168.0)
    #: The proxies whose X-Forwarded-For says who the client is, comma-separated addresses or networks
    #: ("10.0.0.5, 192.168.0.0/24"). Empty (the default): no header is believed, and a wrong key is
    #: counted against the socket's peer. Start uvicorn with --no-proxy-headers when setting it: else it
    #: rewrites the peer from the header for 127.0.0.1 first, and those requests count as one client.
    trusted_proxies: str = ""

    #: The stock lane's store: LangGraph's PostgresStore (postgres), or the same lane, LangMem tools
    #: and prompt on BeadsStore, LangGraph's store API over our fact graph (beads).
    stock_store: Literal["postgres", "beads"] = "postgres"

    #: Give both lanes the web-search tool and the research sub-agent.
    web_search: bool = True
    research: bool = True
    #: At startup, run the smoke gate's tool-call checks on the model (playground.models.smoke): one
    #: that fails them runs both lanes without web search and the research sub-agent. Off, the
    #: lanes get what web_search and research say, whatever the model.
    tool_gate: bool = True

    @field_validator("model")
    @classmethod
    def _a_model_spec(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return str(parse_model_spec(value))

    @field_validator("max_message_chars")
    @classmethod
    def _bounded_message_size(cls, value: int) -> int:
        if not 1 <= value <= MAX_MESSAGE_CHARS_CEILING:
            raise ValueError(f"max_message_chars must be between 1 and {MAX_MESSAGE_CHARS_CEILING}")
        return value

    @field_validator("api_key")
    @classmethod
    def _strong_api_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        if problem := api_key_problem(value.get_secret_value()):
            raise ValueError(problem)
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: str) -> str:
        for name in (n.strip() for n in value.split(",")):
            if name and (name == "*" or not all(c.isalnum() or c in ".-_:[]" for c in name)):
                raise ValueError(
                    f"allowed_hosts: {name!r} is not a host name (a leading dot allows subdomains)"
                )
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        for entry in (e.strip() for e in value.split(",")):
            if not entry:
                continue
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted_proxies: {entry!r} is not an address or a network (e.g. 10.0.0.5, 10.0.0.0/24)"
                ) from None
        return value

    @property
    def trusted_proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        entries = (e.strip() for e in self.trusted_proxies.split(","))
        return tuple(ipaddress.ip_network(e, strict=False) for e in entries if e)

    @property
    def login_seconds(self) -> int:
        return max(1, round(self.login_hours * 3600))

    @property
    def allowed_host_names(self) -> frozenset[str]:
        # as a Host header's name is compared: lowercase, no trailing dot, an IPv6 address unbracketed
        names = (n.strip().lower().rstrip(".") for n in self.allowed_hosts.split(","))
        return frozenset(n[1:-1] if n.startswith("[") and n.endswith("]") else n for n in names if n)

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if "://" in value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("database_url must be a postgresql:// URL or a key=value connection string")
        return value

    @model_validator(mode="after")
    def _heartbeat_fits_lease(self) -> PlaygroundSettings:
        if self.poll_seconds >= self.lease_seconds:
            raise ValueError("poll_seconds must be shorter than lease_seconds")
        return self

    def offers_memory_tools(self, backend: str) -> bool:
        """Whether our lane's model, from `backend` (playground.models.select), gets the memory tools."""
        if self.memory_tools == "auto":
            return backend != "local"
        return self.memory_tools == "on"

    @property
    def app_pool_size(self) -> int:
        return self.pool_size if self.pool_size is not None else 8 + 3 * self.workers

    @property
    def connections_per_process(self) -> int:
        """The most connections one app process opens: its three pools full, and its own."""
        return self.app_pool_size + self.facts_pool_size + self.stock_pool_size + DEDICATED_CONNECTIONS

    @property
    def max_body_bytes(self) -> int:
        """The largest request body read at all: the message limit in UTF-8 worst case, plus form overhead."""
        return self.max_message_chars * 4 * 3 + 4_096  # form encoding triples a byte at worst (%XX)


def api_key_problem(key: str) -> str | None:
    """Why `key` is refused as PLAYGROUND_API_KEY, or None (memory.doors.keys: the MCP server's key follows
    the same rules)."""
    return key_problem(key, "api_key")
