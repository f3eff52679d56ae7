"""A synthetic conversation history: messages of 2 to 4 claims about 200 topics, with revisions.

The shape follows what the store sees in use: most facts come from the user's messages to the main
agent (some of them questions, which become directives), about a fifth from sub-agents reading tool
results in forked namespaces, and about a tenth belong to supersedes chains (a claim later revised
once or twice by a single-sentence message in the same namespace). Everything is drawn from one
seeded `random.Random`, so a size always yields the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from bench.embedder import TOPICS
from memory.model import UNTRUSTED_SOURCES, Kind, Source
from memory.rules.splitting import Claim, split_message

_TEAMS = ("atlas", "borealis", "cobalt", "delta", "ember", "falcon", "granite", "harbor", "indigo", "juniper")
_REGIONS = ("eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1", "ap-northeast-1")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_MONTHS = ("January", "February", "March", "April", "June", "July", "August", "September", "October",
           "November")  # fmt: skip
_DATASTORES = ["Postgres 16", "Postgres 17", "Redis 7", "Cassandra", "DynamoDB", "ClickHouse"]
_LEVELS = ["debug", "info", "warning", "error"]


def _value(attr: str, rng: random.Random) -> str:
    pick = rng.choice
    n = rng.randint
    return {
        "p95 latency budget": lambda: f"{pick([80, 100, 120, 150, 200, 250, 300, 400])} milliseconds",
        "retention window": lambda: f"{pick([7, 14, 30, 45, 60, 90, 180, 365])} days",
        "owner": lambda: f"team {pick(_TEAMS)}",
        "deploy region": lambda: pick(_REGIONS),
        "replica count": lambda: str(n(1, 12)),
        "request timeout": lambda: f"{n(1, 60)} seconds",
        "rate limit": lambda: f"{pick([50, 100, 200, 500, 1000, 5000])} requests per second",
        "error budget": lambda: f"{pick(['0.1', '0.5', '1', '2'])} percent",
        "on-call rotation": lambda: f"{pick(['weekly', 'biweekly', 'daily'])} with team {pick(_TEAMS)}",
        "release train": lambda: f"every {pick(_DAYS)}",
        "connection pool size": lambda: str(pick([5, 10, 20, 40, 80])),
        "backup schedule": lambda: f"every {pick([1, 2, 4, 6, 12, 24])} hours",
        "log level": lambda: pick(_LEVELS),
        "primary datastore": lambda: pick(_DATASTORES),
        "cost ceiling": lambda: f"{n(2, 90) * 100} dollars per month",
        "alert threshold": lambda: f"{n(50, 95)} percent CPU",
        "schema version": lambda: f"v{n(1, 40)}",
        "max batch size": lambda: f"{pick([100, 250, 500, 1000, 5000])} records",
        "migration deadline": lambda: f"the end of {pick(_MONTHS)}",
        "node count": lambda: f"{n(2, 64)} nodes",
        "cache hit target": lambda: f"{n(80, 99)} percent",
        "API key rotation": lambda: f"every {pick([30, 60, 90])} days",
        "disk quota": lambda: f"{pick([50, 100, 200, 500, 1000])} gigabytes",
        "maintenance window": lambda: f"{pick(_DAYS)} at {n(0, 5)} am UTC",
    }[attr]()


ATTRIBUTES = (
    "p95 latency budget", "retention window", "owner", "deploy region", "replica count", "request timeout",
    "rate limit", "error budget", "on-call rotation", "release train", "connection pool size",
    "backup schedule", "log level", "primary datastore", "cost ceiling", "alert threshold",
    "schema version", "max batch size", "migration deadline", "node count", "cache hit target",
    "API key rotation", "disk quota", "maintenance window",
)  # fmt: skip

_CLAIMS = (
    "The {attr} of the {topic} is {value}.",
    "We set the {attr} of the {topic} to {value}.",
    "For the {topic}, the {attr} is {value}.",
    "Our {topic} has a {attr} of {value}.",
)
_QUESTIONS = ("What is the {attr} of the {topic}?", "Can you check the {attr} for the {topic}?")
_REVISIONS = ("The {attr} of the {topic} is now {value}.", "We changed the {attr} of the {topic} to {value}.")
QUERY_FORMS = (
    "What is the {attr} of the {topic}?",
    "Which {attr} does the {topic} have?",
    "{attr} of the {topic}",
)

# sub-agent namespaces: (label, parent label); about 20% of facts live here, the rest in the root
FORKS = (("researcher", "root"), ("coder", "root"), ("reviewer", "root"), ("analyst", "root"),
         ("web-reader", "researcher"))  # fmt: skip
FORK_SHARE = 0.20
CHAIN_SHARE = 0.10  # facts that belong to a supersedes chain
QUESTION_SHARE = 0.12  # sentences of user messages that are questions (directives)


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    topic: str
    attr: str


@dataclass(slots=True)
class Message:
    message_id: str
    thread_id: str
    agent: str  # "root" or a fork label
    source: Source
    sentences: list[Sentence]
    order: float = 0.0  # position in the conversation (revisions slot in after what they revise)

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)


@dataclass(slots=True)
class Corpus:
    messages: list[Message]
    # each chain lists (message_id, sentence index) of its versions, oldest first
    chains: list[list[tuple[str, int]]] = field(default_factory=list)

    @property
    def fact_count(self) -> int:
        return sum(len(m.sentences) for m in self.messages)


def sentence(rng: random.Random, topic: str, *, question: bool = False, revision: bool = False) -> Sentence:
    attr = rng.choice(ATTRIBUTES)
    return sentence_about(rng, topic, attr, question=question, revision=revision)


def sentence_about(
    rng: random.Random, topic: str, attr: str, *, question: bool = False, revision: bool = False
) -> Sentence:
    forms = _QUESTIONS if question else _REVISIONS if revision else _CLAIMS
    text = rng.choice(forms).format(attr=attr, topic=topic, value=_value(attr, rng))
    return Sentence(text[0].upper() + text[1:], topic, attr)


def message_sentences(rng: random.Random, agent: str) -> list[Sentence]:
    """2 to 4 sentences, mostly about one topic (people talk about one thing at a time)."""
    main = rng.choice(TOPICS)
    out = []
    for _ in range(rng.randint(2, 4)):
        topic = main if rng.random() < 0.7 else rng.choice(TOPICS)
        out.append(sentence(rng, topic, question=agent == "root" and rng.random() < QUESTION_SHARE))
    # a message that is all questions is rare in practice; keep at least one statement
    if all(s.text.endswith("?") for s in out):
        out[0] = sentence(rng, main)
    return out


def splits_verbatim(text: str, sentences: list[Sentence]) -> bool:
    """True when the library's splitter cuts `text` into exactly these sentences."""
    return [c.text for c in split_message(text)] == [s.text for s in sentences]


def build_corpus(facts: int, seed: int = 1, prefix: str = "m") -> Corpus:
    """About `facts` facts (exactly, unless the last message overshoots by a claim or two)."""
    rng = random.Random(f"{seed}:{facts}:{prefix}")
    labels = ["root"] + [label for label, _ in FORKS]
    weights = [1 - FORK_SHARE] + [FORK_SHARE / len(FORKS)] * len(FORKS)
    chain_count = round(facts * CHAIN_SHARE / 2.5)  # chains of 2 or 3 versions
    base_target = facts - round(chain_count * 1.5)
    messages: list[Message] = []
    base = 0
    while base < base_target:
        agent = rng.choices(labels, weights)[0]
        sentences = message_sentences(rng, agent)[: base_target - base]
        if len(sentences) < 2 and base + len(sentences) < base_target:
            continue
        mid = f"{prefix}{len(messages):07d}"
        if not splits_verbatim(" ".join(s.text for s in sentences), sentences):
            raise AssertionError(f"the splitter does not cut {mid} as generated: {sentences}")
        source = Source.PASSIVE_CAPTURE if agent == "root" else Source.TOOL_RESULT
        messages.append(Message(mid, f"t{len(messages) // 20:05d}", agent, source, sentences, len(messages)))
        base += len(sentences)

    # chain starts: statements (not questions), each revised by 1 or 2 later single-sentence messages
    statements = [(m, i) for m in messages for i, s in enumerate(m.sentences) if not s.text.endswith("?")]
    chains: list[list[tuple[str, int]]] = []
    revisions: list[Message] = []
    extra_target = facts - base
    for m, i in rng.sample(statements, min(chain_count, len(statements))):
        if extra_target <= 0:
            break
        versions = min(rng.choice((1, 2)), extra_target)
        chain = [(m.message_id, i)]
        order = m.order
        for _ in range(versions):
            order += rng.uniform(1, 200)
            rev = sentence_about(rng, m.sentences[i].topic, m.sentences[i].attr, revision=True)
            mid = f"{prefix}r{len(revisions):07d}"
            revisions.append(Message(mid, m.thread_id, m.agent, m.source, [rev], order))
            chain.append((mid, 0))
        extra_target -= versions
        chains.append(chain)
    messages.extend(revisions)
    messages.sort(key=lambda msg: msg.order)
    return Corpus(messages, chains)


def kinds_for(message: Message, claims: list[Claim]) -> list[Kind]:
    """The kinds capture_message gives these claims (tool results never yield directives)."""
    if message.source in UNTRUSTED_SOURCES:
        return [Kind.CONCLUSION for _ in claims]
    return [Kind(c.kind) for c in claims]


def queries(rng: random.Random, corpus: Corpus, count: int) -> list[str]:
    """Questions about claims the corpus holds, so each one lands on an existing topic."""
    statements = [s for m in corpus.messages for s in m.sentences if not s.text.endswith("?")]
    out = []
    for s in rng.sample(statements, min(count, len(statements))):
        text = rng.choice(QUERY_FORMS).format(attr=s.attr, topic=s.topic)
        out.append(text[0].upper() + text[1:])
    return out
