"""The two scenarios: what the user says, in which conversation, and the records their tools return.

Every message runs on a new LangGraph thread, as in the playground; a conversation number only groups
messages the way a user would (a constraint stated on Monday, corrected on Wednesday). A fact is
stated, then a tool or a sub-agent finds something the user never said, then the user corrects the
fact, and the last message asks for a decision that needs both the corrected fact and the finding,
in words that name neither.

Both lanes get the scenario's tool (and their research sub-agents get it too): a lookup that answers
from the fixed records below, so a finding is checkable against text the harness knows, and no run
depends on the network.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.tools import BaseTool, StructuredTool

#: what a step is for: the report reads the checks of the `delegate` and `final` steps
Role = Literal["state", "delegate", "correct", "aside", "final"]


@dataclass(frozen=True)
class Step:
    conversation: int
    role: Role
    text: str
    #: what a careful assistant answers, and what one that kept the replaced value answers (the
    #: judge's two control transcripts)
    gold: str
    stale: str


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    tool_name: str
    tool_doc: str
    records: dict[str, str]
    steps: tuple[Step, ...]
    #: the values the final checks look for (see bench.scenarios.checks)
    current: str
    stale: str
    finding: tuple[str, ...] = ()
    fitting_choice: str | None = None
    stale_choice: str | None = None
    choices: tuple[str, ...] = ()
    #: how the user listed the choices: a reply that repeats the list has not chosen (see checks)
    listing: str = ""

    @property
    def final_index(self) -> int:
        return next(i for i, s in enumerate(self.steps) if s.role == "final")

    @property
    def delegate_index(self) -> int:
        return next(i for i, s in enumerate(self.steps) if s.role == "delegate")

    def lookup(self, query: str) -> str:
        """Every record whose name the query mentions; the list of names when it mentions none."""
        wanted = query.lower()
        found = [text for name, text in self.records.items() if name in wanted]
        if found:
            return "\n".join(found)
        names = ", ".join(name for name in self.records)
        return f"No record matches {query.strip()!r}. Records exist for: {names}."


_QDRANT = (
    "Qdrant: open source (Apache-2.0), self-hostable. Benchmark run of March 2025, 1M vectors of "
    "768 dimensions: recall@10 0.94, p95 query latency 19 ms. Self-hosted cost at that load: $180 per month."
)
_WEAVIATE = (
    "Weaviate: open source (BSD-3), self-hostable. Benchmark run of March 2025, 1M vectors of "
    "768 dimensions: recall@10 0.99, p95 query latency 8 ms. Self-hosted cost at that load: $430 per month."
)
_PINECONE = (
    "Pinecone: a managed service only, not self-hostable. Benchmark run of March 2025, 1M vectors of "
    "768 dimensions: recall@10 0.96, p95 query latency 14 ms. Cost at that load: $150 per month."
)

VECDB = Scenario(
    name="vecdb",
    title="Choosing a vector database, over three conversations",
    tool_name="vector_db_benchmarks",
    tool_doc="Benchmark figures and costs of one or more vector databases, from our own benchmark runs.",
    records={"qdrant": _QDRANT, "weaviate": _WEAVIATE, "pinecone": _PINECONE},
    steps=(
        Step(
            1,
            "state",
            "We're choosing a vector database for product search. The constraints: the budget is $500 "
            "per month, it has to be self-hostable, and we decide only on benchmark figures from the "
            "vector_db_benchmarks tool, never on vendor marketing.",
            gold="Noted: $500 per month, self-hostable, and only figures from vector_db_benchmarks.",
            stale="Noted: $500 per month, self-hostable, and only figures from vector_db_benchmarks.",
        ),
        Step(
            1,
            "delegate",
            "Have a researcher look up the benchmark figures for Qdrant, Weaviate and Pinecone with the "
            "vector_db_benchmarks tool.",
            gold="Qdrant: recall 0.94, 19 ms, $180 a month, self-hostable. Weaviate: recall 0.99, 8 ms, "
            "$430 a month, self-hostable. Pinecone: recall 0.96, 14 ms, $150 a month, managed only.",
            stale="Qdrant: recall 0.94, 19 ms, $180 a month, self-hostable. Weaviate: recall 0.99, 8 ms, "
            "$430 a month, self-hostable. Pinecone: recall 0.96, 14 ms, $150 a month, managed only.",
        ),
        Step(
            2,
            "correct",
            "Correction: finance cut our budget to $200 per month.",
            gold="Noted: the budget is now $200 per month.",
            stale="Noted.",
        ),
        Step(
            3,
            "final",
            "Which vector database should we choose? Say which monthly budget and which figures the "
            "choice rests on.",
            gold="Qdrant. With a budget of $200 per month and self-hosting required, it is the only fit: "
            "$180 per month, recall@10 0.94, p95 19 ms. Weaviate costs $430 and Pinecone is not "
            "self-hostable.",
            stale="Weaviate. Within the $500 per month budget and self-hosted, it has the best figures: "
            "recall@10 0.99 and p95 8 ms for $430 per month.",
        ),
    ),
    current="200",
    stale="500",
    finding=("0.94", "19 ms", "180", "0.99", "8 ms", "430", "0.96", "14 ms", "150"),
    fitting_choice="qdrant",
    stale_choice="weaviate",
    choices=("qdrant", "weaviate", "pinecone"),
    listing="Qdrant, Weaviate and Pinecone",
)

_CHECKOUT_LOGS = "\n".join(
    (
        "checkout-api logs, 14:00 to 14:06 UTC:",
        "14:03:00 INFO cron: started job invoice-export (batch 2025-Q1, all customers)",
        "14:04:12 WARN db-pool: 38/50 connections in use",
        "14:04:58 WARN db-pool: 50/50 connections in use; 44 held by job invoice-export",
        "14:05:03 ERROR checkout: timed out after 2000 ms waiting for a database connection",
        "14:05:40 ERROR checkout: timed out after 2000 ms waiting for a database connection",
    )
)

INCIDENT = Scenario(
    name="incident",
    title="Debugging a production incident, over four conversations",
    tool_name="read_service_logs",
    tool_doc="Recent log lines of one service.",
    records={"checkout": _CHECKOUT_LOGS},
    steps=(
        Step(
            1,
            "state",
            "Incident: since 14:05 UTC the checkout-api's p95 latency went from 210 ms to 2.4 s, and "
            "requests time out waiting for a database connection. Its last deploy went out at 13:40 UTC.",
            gold="Noted: latency up since 14:05 UTC, connection timeouts, last deploy at 13:40 UTC.",
            stale="Noted: latency up since 14:05 UTC, connection timeouts, last deploy at 13:40 UTC.",
        ),
        Step(
            2,
            "delegate",
            "Delegate this to a researcher: read the checkout-api logs with the read_service_logs tool "
            "and find out what is holding the database connections.",
            gold="The logs show the invoice-export job, started by cron at 14:03, holding 44 of the 50 "
            "pool connections at 14:04:58; checkout timed out waiting for a connection from 14:05.",
            stale="The logs show the invoice-export job, started by cron at 14:03, holding 44 of the 50 "
            "pool connections at 14:04:58; checkout timed out waiting for a connection from 14:05.",
        ),
        Step(
            3,
            "correct",
            "Correction: the checkout-api deploy went out at 14:02 UTC; the deploy log had shown local time.",
            gold="Noted: the deploy went out at 14:02 UTC.",
            stale="Noted.",
        ),
        Step(
            3,
            "aside",
            "For the record, the status page already says we are investigating.",
            gold="Noted.",
            stale="Noted.",
        ),
        Step(
            4,
            "final",
            "Write the handover for the next on-call: what is holding the database connections, when did "
            "the last deploy go out, and what should they do next?",
            gold="The invoice-export job (cron, 14:03 UTC) holds 44 of the 50 database connections. The "
            "last deploy went out at 14:02 UTC, just before the latency rose at 14:05. Next: pause "
            "invoice-export or cap its connections, then check whether the 14:02 deploy changed the pool.",
            stale="The invoice-export job (cron, 14:03 UTC) holds 44 of the 50 database connections. The "
            "last deploy went out at 13:40 UTC, 25 minutes before the latency rose, so it is not the "
            "cause. Next: pause invoice-export or cap its connections.",
        ),
    ),
    current="14:02",
    stale="13:40",
    finding=("invoice-export", "invoice export"),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (VECDB, INCIDENT)}


@dataclass
class ToolLog:
    """Every call of a scenario's tool, by the lane or by its sub-agents (the tool runs in threads)."""

    calls: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, query: str) -> None:
        with self._lock:
            self.calls.append(query)

    def take(self) -> list[str]:
        """The calls since the last take."""
        with self._lock:
            taken, self.calls = self.calls, []
        return taken


def scenario_tool(scenario: Scenario, log: ToolLog) -> BaseTool:
    """The scenario's lookup as a tool both lanes (and their sub-agents) can call."""

    def lookup(query: str) -> str:
        log.record(query)
        return scenario.lookup(query)

    lookup.__doc__ = scenario.tool_doc
    run: Callable[[str], str] = lookup
    return StructuredTool.from_function(run, name=scenario.tool_name, description=scenario.tool_doc)
