"""Heuristic, verbatim splitting of a user message into claims."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.rules.splitting import Claim, classify, is_framing, split_message

U = "user_input"
D = "directive"

CASES: list[tuple[str, str, list[tuple[str, str]]]] = [
    # --- a lowercase unit is not a title ("ms" after a number ends a sentence; "Ms." does not) --------
    (
        "unit-before-question",
        "p99 latency is 120 ms. What is our budget?",
        [("p99 latency is 120 ms.", U), ("What is our budget?", D)],
    ),
    (
        "title-before-name",
        "Ms. Lee approved the budget. Dr. Okafor signs off on Friday.",
        [("Ms. Lee approved the budget.", U), ("Dr. Okafor signs off on Friday.", U)],
    ),
    # --- several constraints in one sentence -------------------------------------------------------
    (
        "three-constraints",
        "Budget is $100k per year; it must be self-hostable; latency under 50 ms",
        [("Budget is $100k per year", U), ("it must be self-hostable", U), ("latency under 50 ms", U)],
    ),
    (
        "semicolon-personal",
        "I live in Lisbon; my partner works remotely; we have two kids.",
        [("I live in Lisbon", U), ("my partner works remotely", U), ("we have two kids.", U)],
    ),
    (
        "semicolon-unicode",
        "Our office is in São Paulo; the team speaks Portuguese.",
        [("Our office is in São Paulo", U), ("the team speaks Portuguese.", U)],
    ),
    (
        "comma-and-two-clauses",
        "The team is in Berlin, and the budget is €50k.",
        [("The team is in Berlin", U), ("the budget is €50k.", U)],
    ),
    (
        "and-also-two-clauses",
        "We need SSO and also it must run on-prem.",
        [("We need SSO", U), ("it must run on-prem.", U)],
    ),
    (
        "api-constraints",
        "The API must respond in under 200 ms, and it should degrade gracefully when the cache is cold.",
        [
            ("The API must respond in under 200 ms", U),
            ("it should degrade gracefully when the cache is cold.", U),
        ],
    ),
    # --- never shred one claim ----------------------------------------------------------------------
    (
        "long-claim-with-commas",
        "We run Postgres 16 on a 3-node cluster in eu-west-1, behind PgBouncer, with nightly base backups.",
        [
            (
                "We run Postgres 16 on a 3-node cluster in eu-west-1, behind PgBouncer, with nightly base backups.",
                U,
            )
        ],
    ),
    ("noun-list", "We use Kafka, Redis and Postgres.", [("We use Kafka, Redis and Postgres.", U)]),
    (
        "oxford-comma-noun-list",
        "Our stack is Django, Celery, and React.",
        [("Our stack is Django, Celery, and React.", U)],
    ),
    (
        "semicolon-noun-list",
        "We evaluated Milvus; Qdrant; Weaviate.",
        [("We evaluated Milvus; Qdrant; Weaviate.", U)],
    ),
    (
        "compound-preference",
        "I'm vegetarian and allergic to peanuts.",
        [("I'm vegetarian and allergic to peanuts.", U)],
    ),
    (
        "directive-not-cut-at-and-also",
        "Summarize the thread, and also list the open questions.",
        [("Summarize the thread, and also list the open questions.", D)],
    ),
    (
        "no-punctuation",
        "we mostly use postgres and some redis for caching",
        [("we mostly use postgres and some redis for caching", U)],
    ),
    # --- sentence boundaries that are not boundaries ------------------------------------------------
    (
        "decimals",
        "We raised $1.5M in the seed round. Pi to two places is 3.14.",
        [("We raised $1.5M in the seed round.", U), ("Pi to two places is 3.14.", U)],
    ),
    (
        "abbreviations",
        "We looked at managed options, e.g. Pinecone vs. Weaviate Cloud, i.e. nothing self-hosted.",
        [("We looked at managed options, e.g. Pinecone vs. Weaviate Cloud, i.e. nothing self-hosted.", U)],
    ),
    ("title-and-acronym", "Dr. Patel runs the U.S. data team.", [("Dr. Patel runs the U.S. data team.", U)]),
    (
        "versions",
        "We are on v1.2.3 of the SDK and Python 3.11. Node is pinned to 20.10.0.",
        [("We are on v1.2.3 of the SDK and Python 3.11.", U), ("Node is pinned to 20.10.0.", U)],
    ),
    (
        "url-and-email",
        "The spec lives at https://docs.example.com/v2.1/api.html. Questions go to ops@example.com.",
        [
            ("The spec lives at https://docs.example.com/v2.1/api.html.", U),
            ("Questions go to ops@example.com.", U),
        ],
    ),
    (
        "ellipsis",
        "We tried sharding... It made things worse.",
        [("We tried sharding... It made things worse.", U)],
    ),
    (
        "inside-quotes",
        'The client literally wrote "No downtime. Ever." in the contract.',
        [('The client literally wrote "No downtime. Ever." in the contract.', U)],
    ),
    (
        "inside-parentheses",
        "Our SLA is strict (99.95% monthly. No exceptions.) and audited.",
        [("Our SLA is strict (99.95% monthly. No exceptions.) and audited.", U)],
    ),
    (
        "curly-quote-ends-sentence",
        "She said “we ship Friday.” Then she went on leave.",
        [("She said “we ship Friday.”", U), ("Then she went on leave.", U)],
    ),
    (
        "lowercase-after-period",
        "Acme Inc. is our largest customer.",
        [("Acme Inc. is our largest customer.", U)],
    ),
    ("dotted-time", "Standup is at 9 a.m. Berlin time.", [("Standup is at 9 a.m. Berlin time.", U)]),
    (
        "vs-between-sentences",
        "Sales grew 12% in Q3 vs. Q2. Costs were flat.",
        [("Sales grew 12% in Q3 vs. Q2.", U), ("Costs were flat.", U)],
    ),
    (
        "exclamation",
        "The migration is done! Latency dropped to 12 ms.",
        [("The migration is done!", U), ("Latency dropped to 12 ms.", U)],
    ),
    # --- lines and lists ----------------------------------------------------------------------------
    (
        "dash-bullets-under-heading",
        "Requirements:\n- must be self-hostable\n- p99 under 50 ms\n- SOC 2 Type II",
        [("must be self-hostable", U), ("p99 under 50 ms", U), ("SOC 2 Type II", U)],
    ),
    (
        "numbered-items",
        "1. Postgres 16 is the primary store.\n2) Redis handles sessions.\n10. Kafka is only for audit events.",
        [
            ("Postgres 16 is the primary store.", U),
            ("Redis handles sessions.", U),
            ("Kafka is only for audit events.", U),
        ],
    ),
    (
        "bullet-with-two-sentences",
        "* Budget: $20k. Hard cap.\n* Deadline is June 30.",
        [("Budget: $20k.", U), ("Hard cap.", U), ("Deadline is June 30.", U)],
    ),
    (
        "markdown-heading-and-bullets",
        "## Constraints\n- p99 under 50 ms\n• no vendor lock-in",
        [("p99 under 50 ms", U), ("no vendor lock-in", U)],
    ),
    (
        "checkboxes",
        "- [x] migrate to Postgres 16\n- [ ] set up PgBouncer",
        [("migrate to Postgres 16", U), ("set up PgBouncer", U)],
    ),
    (
        "crlf-lines",
        "Budget is $5k.\r\nDeadline is Friday.",
        [("Budget is $5k.", U), ("Deadline is Friday.", U)],
    ),
    # --- framing is dropped -------------------------------------------------------------------------
    ("handoff", "New shift taking over.", []),
    ("pleasantries", "Hello there. Sounds good. Got it. Great, thanks.", []),
    ("pleasantry-lines", "Hi!\nThank you so much.\nOK.", []),
    (
        "mixed",
        "Hi! Our budget is $100k per year. Can you compare Qdrant and Weaviate?",
        [("Our budget is $100k per year.", U), ("Can you compare Qdrant and Weaviate?", D)],
    ),
    (
        "context-handoff",
        "Let me give you some context. We're a 12-person fintech in Lisbon.",
        [("We're a 12-person fintech in Lisbon.", U)],
    ),
    (
        "framing-prefix-colon",
        "Quick update: the Postgres 16 migration finished last night.",
        [("the Postgres 16 migration finished last night.", U)],
    ),
    (
        "framing-prefix-chain",
        "Good morning! Hi team, here's a quick update: the old MySQL box is off.",
        [("the old MySQL box is off.", U)],
    ),
    ("framing-label", "Update: Redis is down again.", [("Redis is down again.", U)]),
    (
        "update-handoff",
        "Here's an update. The vendor agreed to a 15% discount.",
        [("The vendor agreed to a 15% discount.", U)],
    ),
    (
        "picking-up",
        "Picking this up from yesterday. Legal approved the DPA.",
        [("Legal approved the DPA.", U)],
    ),
    (
        "thanks-prefix-comma",
        "Thanks for the update, we'll ship on Monday.",
        [("we'll ship on Monday.", U)],
    ),
    (
        "greeting-with-name",
        "Hey Sam! My partner's birthday is on May 12th, and she loves Thai food.",
        [("My partner's birthday is on May 12th", U), ("she loves Thai food.", U)],
    ),
    ("emoji", "🚀 Shipped v2.0 to prod today! 🎉", [("🚀 Shipped v2.0 to prod today!", U)]),
    # --- directives ---------------------------------------------------------------------------------
    (
        "question",
        "What's the p99 latency of pgvector at 10M rows?",
        [("What's the p99 latency of pgvector at 10M rows?", D)],
    ),
    (
        "question-without-mark",
        "Is Kafka overkill for 200 events per second",
        [("Is Kafka overkill for 200 events per second", D)],
    ),
    (
        "two-questions",
        "Why is the nightly backup taking 4 hours? Could you look into it?",
        [("Why is the nightly backup taking 4 hours?", D), ("Could you look into it?", D)],
    ),
    (
        "question-after-wait",
        "Wait, is that per seat or per org?",
        [("Wait, is that per seat or per org?", D)],
    ),
    (
        "follow-up-without-mark",
        "Thanks, that helps. What about pricing for the EU region",
        [("What about pricing for the EU region", D)],
    ),
    (
        "please",
        "Please summarize the tradeoffs between pgvector and Qdrant.",
        [("Please summarize the tradeoffs between pgvector and Qdrant.", D)],
    ),
    (
        "imperative-find",
        "Find three vendors that offer EU data residency.",
        [("Find three vendors that offer EU data residency.", D)],
    ),
    (
        "imperative-compare",
        "Compare Qdrant and Weaviate on recall and memory footprint.",
        [("Compare Qdrant and Weaviate on recall and memory footprint.", D)],
    ),
    (
        "can-you-with-period",
        "Can you check whether Weaviate supports multi-tenancy.",
        [("Can you check whether Weaviate supports multi-tenancy.", D)],
    ),
    ("lets", "Let's go with the managed option for now.", [("Let's go with the managed option for now.", D)]),
    (
        "i-want-you-to",
        "I want you to draft a migration plan.",
        [("I want you to draft a migration plan.", D)],
    ),
    (
        "your-task",
        "Your task is to shortlist two vector databases.",
        [("Your task is to shortlist two vector databases.", D)],
    ),
    (
        "goal",
        "Our goal is to cut infra spend this quarter.",
        [("Our goal is to cut infra spend this quarter.", D)],
    ),
    # a goal that carries a value says where things stand: a claim, recalled and corrected like one
    (
        "goal-with-a-value",
        "Our goal is to cut infra spend by 30% this quarter.",
        [("Our goal is to cut infra spend by 30% this quarter.", U)],
    ),
    (
        "trying-to-with-a-date",
        "I'm trying to move the launch to May 5, but the vendor is late.",
        [("I'm trying to move the launch to May 5, but the vendor is late.", U)],
    ),
    (
        "need-to-decide",
        "I need to decide between Kafka and Pulsar by Friday.",
        [("I need to decide between Kafka and Pulsar by Friday.", D)],
    ),
    (
        "assistant-errand",
        "My flight lands at 6:40 a.m. on Tuesday. Book a hotel near the airport.",
        [("My flight lands at 6:40 a.m. on Tuesday.", U), ("Book a hotel near the airport.", D)],
    ),
    (
        "reminder",
        "Remind me to renew my passport in March.",
        [("Remind me to renew my passport in March.", D)],
    ),
    # --- constraints are not directives -------------------------------------------------------------
    ("need-x-to-be", "I need the store to be self-hostable.", [("I need the store to be self-hostable.", U)]),
    ("bare-must", "Must be self-hostable.", [("Must be self-hostable.", U)]),
    (
        "we-must-it-has-to",
        "We must stay on AWS. It has to be HIPAA compliant.",
        [("We must stay on AWS.", U), ("It has to be HIPAA compliant.", U)],
    ),
    (
        "subordinate-when",
        "When the cache is cold, p99 jumps to 400 ms.",
        [("When the cache is cold, p99 jumps to 400 ms.", U)],
    ),
    ("noun-not-imperative", "Review meetings are on Thursdays.", [("Review meetings are on Thursdays.", U)]),
    # --- degenerate input ---------------------------------------------------------------------------
    ("empty", "", []),
    ("whitespace-only", "  \n\t \r\n ", []),
    ("emoji-only", "👍 🙏", []),
]


@pytest.mark.parametrize(("message", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_split_message(message: str, expected: list[tuple[str, str]]) -> None:
    claims = split_message(message)
    assert [(c.text, c.kind) for c in claims] == expected
    for c in claims:
        assert message[c.start : c.end] == c.text


def test_bullet_marker_is_outside_the_span() -> None:
    message = "Notes:\n  - p99 under 50 ms\n  2) EU only"
    claims = split_message(message)
    assert [c.text for c in claims] == ["p99 under 50 ms", "EU only"]
    assert [c.start for c in claims] == [message.index("p99"), message.index("EU")]
    assert claims[1].end == len(message)


@pytest.mark.parametrize(
    "sentence",
    [
        "New shift taking over.",
        "Hi!",
        "Hello there.",
        "Thanks!",
        "Thank you so much.",
        "OK.",
        "Got it.",
        "Sounds good.",
        "Great, thanks.",
        "Let me give you some context.",
        "Here's an update.",
        "Quick update:",
        "Picking this up from yesterday.",
        "Hey team, hope you're well!",
        "Morning all 👋",
        "Thanks, Sam.",
        # a chat partner's reactions, with or without the name of the one addressed
        "Yep, Maria!",
        "That's awesome, John!",
        "Congrats again!",
        "Caroline!",
        "Oof, that's tough, Jon.",
        "I hope so, Gina.",
        "Way to go!",
        "That's a great pic, Maria.",
        "You're right, Maria.",
    ],
)
def test_framing(sentence: str) -> None:
    assert is_framing(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "Thanks, the budget is $5k.",
        "OK, we go with Postgres.",
        "Got it, latency must stay under 50 ms.",
        "Update: Redis is down.",
        "Great news, Acme signed.",
        "No.",
        "Sounds good to Maria.",
        "Taking over the on-call rotation from Priya.",
        "Paris.",  # an answer, not a call
        "Thursday!",
        "That's wrong.",
        "So expensive!",
        "Maria, the standup moved to 11.",
        "That's a red car, Maria.",
    ],
)
def test_not_framing(sentence: str) -> None:
    assert not is_framing(sentence)


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Which region should we deploy to?", D),
        ("Could you draft the RFC", D),
        ("Let me know which is cheaper.", D),
        ("The aim is a 30% cost reduction.", U),  # a goal with a value: where things stand
        ("The aim is a cheaper setup.", D),
        ("The question is whether to shard now.", D),
        ("Goal: pick a vector DB this week.", D),
        ("Also, please check the licensing.", D),
        ("We're trying to get p99 below 50 ms.", U),
        ("We're trying to get the latency down.", D),
        ("The task is done.", U),
        ("Research is ongoing.", U),
        ("How we deploy is documented in the wiki.", U),
        ("It has to run on ARM.", U),
        ("Don't use MongoDB.", U),
        ("Latency matters more than cost.", U),
    ],
)
def test_classify(sentence: str, kind: str) -> None:
    assert classify(sentence) == kind


def assert_well_formed(message: str, claims: list[Claim]) -> None:
    previous_end = 0
    for c in claims:
        assert message[c.start : c.end] == c.text
        assert c.text and c.text == c.text.strip()
        assert c.start >= previous_end
        assert c.start < c.end
        assert c.kind in (U, D)
        previous_end = c.end


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_any_text_gives_exact_ordered_spans(message: str) -> None:
    assert_well_formed(message, split_message(message))


# Pieces that exercise every rule at once: terminals, quotes, brackets, bullets, connectors, framing.
PIECES = [
    " ", "  ", "\n", "\r\n", "\t", ".", "!", "?", "...", "…", ";", ",", ":", '"', "“", "”", "'", "(", ")",
    "[", "]", "- ", "* ", "1. ", "2) ", "a) ", "#", " and ", ", and ", " and also ", "e.g.", "U.S.", "Dr.",
    "vs.", "3.14", "v1.2.3", "$1.5M", "https://x.io/a.b?c=1", "Hi", "thanks", "OK", "we", "it", "must", "is",
    "Budget", "Redis", "Can you", "Please", "\x00", "\u200f", "🚀", "é", "İ", "ß",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_structured_text_gives_exact_ordered_spans(message: str) -> None:
    assert_well_formed(message, split_message(message))


@given(st.text())
def test_framing_and_classify_never_raise(sentence: str) -> None:
    assert isinstance(is_framing(sentence), bool)
    assert classify(sentence) in (U, D)


@pytest.mark.parametrize(
    "message",
    [
        " " * 200_000 + "and also",
        "(" * 200_000 + ". A",
        '"' * 200_000,
        ". " * 100_000,
        "A. " * 70_000,
        "x; " * 70_000,
        "We use it, and " * 14_000,
        "hi, " * 50_000 + "we use redis.",
        "h" * 200_000,
        'Hi! (e.g. v1.2) "q. r" U.S. x, and also y; ' * 5_000,
    ],
    ids=[
        "spaces",
        "parens",
        "quotes",
        "periods",
        "initials",
        "semicolons",
        "and",
        "greetings",
        "word",
        "mixed",
    ],
)
def test_adversarial_input_is_fast(message: str) -> None:
    started = time.perf_counter()
    assert_well_formed(message, split_message(message))
    assert time.perf_counter() - started < 10


def test_a_statement_is_cut_from_the_request_it_opens() -> None:
    claims = split_message("I've added 52 sources to my Zotero library, so how can I organize them?")
    assert [(c.text, c.kind) for c in claims] == [
        ("I've added 52 sources to my Zotero library", "user_input"),
        ("how can I organize them?", "directive"),
    ]
    mixed = "I'm trying to speed up the dashboard API, which now averages 250ms, can you help me?"
    assert [(c.text, c.kind) for c in split_message(mixed)] == [
        ("I'm trying to speed up the dashboard API, which now averages 250ms", "user_input"),
        ("can you help me?", "directive"),
    ]
    # a question's relative clause stays in it: a directive, recalled by its value
    asked = "What's the best way to roll out the policy, which was finalized on May 11, to every team?"
    assert [(c.text, c.kind) for c in split_message(asked)] == [(asked, "directive")]
    # a short opener is part of the request, and a plain question stays whole
    assert [c.kind for c in split_message("Hey there, can you help me plan a trip?")] == ["directive"]
    assert [c.text for c in split_message("What is our budget, and who approves it?")] == [
        "What is our budget, and who approves it?"
    ]


@pytest.mark.parametrize(
    ("message", "claims"),
    [
        (
            "Our budget is $100k per year, it must be self-hostable.",
            ["Our budget is $100k per year", "it must be self-hostable."],
        ),
        ("The rent is 1,850, we pay it on the 1st.", ["The rent is 1,850", "we pay it on the 1st."]),
        ("Since it is raining, we stay home.", ["Since it is raining, we stay home."]),
        ("If the budget holds, we hire two more.", ["If the budget holds, we hire two more."]),
        ("Our budget, we think, is tight.", ["Our budget, we think, is tight."]),
    ],
)
def test_two_statements_spliced_by_a_comma_are_two_claims(message: str, claims: list[str]) -> None:
    assert [c.text for c in split_message(message)] == claims


@pytest.mark.parametrize(
    ("message", "claims"),
    [
        # conjoined claims a correction of one must not retire together
        (
            "Our budget is $100k per year and it must be self-hostable.",
            ["Our budget is $100k per year", "it must be self-hostable."],
        ),
        ("Our budget is $100k, but we must self-host it.", ["Our budget is $100k", "we must self-host it."]),
        (
            "Our budget is $100k; also it has to run on-prem.",
            ["Our budget is $100k", "also it has to run on-prem."],
        ),
        ("I like tea and I like coffee.", ["I like tea", "I like coffee."]),
        ("I'm vegetarian and our budget is $100k a year.", ["I'm vegetarian", "our budget is $100k a year."]),
        ("We need SSO and the audit logs.", ["We need SSO and the audit logs."]),
        ("Our team and the vendor are in Berlin.", ["Our team and the vendor are in Berlin."]),
        # a clause that only goes on about what the one before named stays with it
        (
            "We finished migrating the API to GCP last week, it runs in europe-west4 now.",
            ["We finished migrating the API to GCP last week, it runs in europe-west4 now."],
        ),
        ("We use Postgres and it works well.", ["We use Postgres and it works well."]),
        ("Tom and I went to Paris.", ["Tom and I went to Paris."]),
    ],
)
def test_conjoined_statements_are_cut_and_continuations_kept(message: str, claims: list[str]) -> None:
    assert [c.text for c in split_message(message)] == claims


@pytest.mark.parametrize(
    ("message", "claim", "question"),
    [
        (
            "He has never complained about the noise, will it affect the next shoot?",
            "He has never complained about the noise",
            "will it affect the next shoot?",
        ),
        (
            "I started running last month, what shoes should I get?",
            "I started running last month",
            "what shoes should I get?",
        ),
        (
            "Given that I have two kids under five, is a road trip to Spain realistic?",
            "Given that I have two kids under five",
            "is a road trip to Spain realistic?",
        ),
    ],
)
def test_a_question_keeps_the_claim_it_carries(message: str, claim: str, question: str) -> None:
    assert [(c.kind, c.text) for c in split_message(message)] == [
        ("user_input", claim),
        ("directive", question),
    ]


@pytest.mark.parametrize(
    "message",
    [
        "What is the best way to learn Rust, given that I know Python?",
        "Can you tell me, is it safe?",
        "When we land in Rome, where should we eat?",
    ],
)
def test_a_question_that_states_nothing_before_it_asks_stays_whole(message: str) -> None:
    assert [c.kind for c in split_message(message)] == ["directive"]


@pytest.mark.parametrize(
    "sentence",
    [
        "This is really helpful, thanks!",
        "Your advice has been great.",
        "I appreciate your help with this.",
        "Great, that helps a lot.",
        "You have been so helpful!",
    ],
)
def test_what_the_user_thinks_of_the_help_is_framing(sentence: str) -> None:
    assert split_message(sentence) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "The new diet has been pretty helpful so far.",
        "This app is really helpful for budgeting.",
        "My physio has been really helpful.",
    ],
)
def test_praise_of_something_else_is_a_claim(sentence: str) -> None:
    assert [c.text for c in split_message(sentence)] == [sentence]


@pytest.mark.parametrize(
    "message",
    [
        "I'm worried about missing the review, so can you remind me that it's moved to May 3 at 4:30 PM?",
        "Please note that the API runs on GCP now.",
        "I want you to remember that I'm vegetarian.",
        "Can you keep in mind that our budget is $80k from now on?",
        "Don't forget that the vet appointment is on Friday.",
    ],
)
def test_a_request_to_keep_a_statement_in_mind_is_a_claim(message: str) -> None:
    # an update told as "remind me that ..." held back as a directive would hide the new value
    # while the one it replaces still shows
    assert [(c.kind, c.text) for c in split_message(message)] == [("user_input", message)]


@pytest.mark.parametrize(
    "message",
    [
        "Do you remember that restaurant we went to?",
        "Can you remind me what time the meeting is?",
        "Remind me to call the plumber at 5.",
        "Please note the deadline for me.",
    ],
)
def test_a_reminder_that_hands_over_no_statement_stays_a_directive(message: str) -> None:
    assert [c.kind for c in split_message(message)] == ["directive"]


def test_a_fenced_code_block_is_one_claim() -> None:
    # cut line by line, a pasted block is fragments ("}", "return x") that crowd out what was said of it
    message = (
        "Our service listens on port 8080. Here is the config:\n"
        "```yaml\nserver:\n  port: 8080\n  host: 0.0.0.0\n```\n"
        "Why does it refuse connections?"
    )
    block = "```yaml\nserver:\n  port: 8080\n  host: 0.0.0.0\n```"
    assert [(c.kind, c.text) for c in split_message(message)] == [
        ("user_input", "Our service listens on port 8080."),
        ("user_input", "Here is the config:"),
        ("user_input", block),
        ("directive", "Why does it refuse connections?"),
    ]


@pytest.mark.parametrize(
    ("message", "blocks"),
    [
        # an unclosed block runs to the end of the message
        ("Try this:\n```\nx = 1\ny = 2", ["```\nx = 1\ny = 2"]),
        # a fence with an info string opens, it never closes; a longer run of the same mark closes
        ("~~~\ncode ``` inside\n```python\n~~~~\nWe moved to Go.", ["~~~\ncode ``` inside\n```python\n~~~~"]),
        # indented up to three spaces; two blocks are two claims
        ("  ```\na()\n  ```\nand\n```\nb()\n```", ["```\na()\n  ```", "```\nb()\n```"]),
    ],
)
def test_fenced_blocks_end_where_commonmark_ends_them(message: str, blocks: list[str]) -> None:
    claims = split_message(message)
    assert all(message[c.start : c.end] == c.text for c in claims)
    assert [c.text for c in claims if c.text.lstrip().startswith(("```", "~~~"))] == blocks


def test_fences_alone_say_nothing() -> None:
    assert [c.text for c in split_message("```\n```\nWe use Postgres 16.")] == ["We use Postgres 16."]
