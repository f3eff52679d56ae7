"""Standing instructions against real Postgres: which claims are one, capture pinning them as they are
said, and the pin reaching a later prompt that shares none of their words."""

from __future__ import annotations

import pytest
from agent_helpers import injection_events, system_text
from langchain.agents import create_agent

from memory.doors.middleware import BeadsMemoryMiddleware
from memory.graph.pins import CAPTURE
from memory.graph.store import FactStore
from memory.model import Kind, Source
from memory.rules.corrections import judge, restates, same_slot
from memory.rules.splitting import split_message
from memory.rules.standing import is_standing_instruction
from memory.scripted import ScriptedChatModel

INSTRUCTIONS = [
    "Always use 24-hour time when I ask about meeting times.",
    "Please always answer in metric units.",
    "Never suggest Java libraries to me.",
    "From now on, reply in Spanish.",
    "Going forward, you should keep answers under five sentences.",
    "Whenever I share code, please add type hints.",
    "Every time I ask about dates, include the weekday.",
    "Remember to always cite your sources.",
    "Don't ever use semicolons in JavaScript examples.",
    "Always be concise.",
    "Always address me as Sam.",
    "Actually, always round prices to two decimals.",
    "Correction: never book flights before 8 AM.",
]
STATEMENTS = [
    "Always the same error with this library.",
    "Never heard of it.",
    "Never been better!",
    "From now on I'll be working remotely.",
    "Whenever I run it, it crashes.",
    "Every time I deploy, the build fails.",
    "Going forward, we will use Postgres.",
    "I always run in the morning.",
    "Always uses too much memory.",
    "Never thought about that.",
    "Always up for something sweet.",
    "Can you always answer in Spanish?",  # a question: the reply says whether
    "Never mind, I found it.",
]


@pytest.mark.parametrize("text", INSTRUCTIONS)
def test_an_instruction_for_every_later_turn_is_standing(text: str) -> None:
    assert is_standing_instruction(text)
    # and a claim to keep, never a request held out of retrieval
    assert [c.kind for c in split_message(text)] == ["user_input"]


@pytest.mark.parametrize("text", STATEMENTS)
def test_a_statement_opened_the_same_way_is_not(text: str) -> None:
    assert not is_standing_instruction(text)


RULE = "Always use 24-hour time when I ask about meeting times."


def test_capture_pins_a_standing_instruction_once_and_nothing_else(store: FactStore) -> None:
    root = store.root("s")
    said = store.capture_message(root, f"The sync is on Tuesdays at 3 PM. {RULE} Which room is free?")
    rule = next(f for f in said.facts if f.body == RULE)
    [pin] = store.pinned("s")
    assert (pin.fact.id, pin.pinned_by, pin.fact.kind) == (rule.id, CAPTURE, Kind.USER_INPUT)
    # said again in another message: the pin already shows those words
    store.capture_message(root, RULE.lower(), message_id="again")
    assert [p.fact.id for p in store.pinned("s")] == [rule.id]
    # a web page's or a tool's "always" is nobody's instruction
    store.capture_message(root, "Never share this link.", source=Source.TOOL_RESULT, message_id="t")
    # nor is the agent's conclusion
    store.remember(root, "Always restart the service after a deploy.")
    assert [p.fact.id for p in store.pinned("s")] == [rule.id]
    # the user may unpin it like any pin, and it stays unpinned
    assert store.unpin(rule) == 1
    store.capture_message(root, f"The sync is on Tuesdays at 3 PM. {RULE} Which room is free?")
    assert store.pinned("s") == []


def test_a_standing_instruction_reaches_a_later_prompt_that_shares_none_of_its_words(
    store: FactStore,
) -> None:
    root = store.root("s")
    store.capture_message(root, RULE, message_id="m0")
    for n in range(8):  # a session's worth of other claims about other things
        store.capture_message(
            root, f"Ticket {n} is about the billing export of region {n}.", message_id=f"t{n}"
        )
    model = ScriptedChatModel(fallback="ok")
    agent = create_agent(model, middleware=[BeadsMemoryMiddleware(store, root)])
    [event] = injection_events(agent, "When do we get together with the design team?")
    system = system_text(model.prompts[-1])
    assert "## Pinned" in system and RULE in system
    assert event["pinned"][0]["pinned_by"] == CAPTURE and event["pinned"][0]["injected"]


def test_a_pin_said_in_a_message_the_call_may_not_read_is_left_out(store: FactStore) -> None:
    root = store.root("s")
    store.capture_message(root, RULE, message_id="later")
    middleware = BeadsMemoryMiddleware(store, root)
    # the evaluation harness asks a question as of before a turn: that turn's pin is not there yet
    hidden = middleware.plan_call([], [], "When is the meeting?", 0, exclude_message_ids=frozenset({"later"}))
    assert hidden.injected_pins == () and hidden.pinned_block == ""
    shown = middleware.plan_call([], [], "When is the meeting?", 0)
    assert [p.fact.body for p in shown.injected_pins] == [RULE]


RULES = [
    "Always use 24-hour time when I ask about meeting times.",
    "Always include exact library versions when I ask about dependencies.",
    "Never suggest Java libraries to me.",
    "Always give distances in miles when I ask about trips.",
    "From now on, reply in Spanish.",
    "Always add type hints when I share Python code.",
]


def pinned_rules(store: FactStore, query: str, retrieved_tokens: int) -> list[str]:
    middleware = BeadsMemoryMiddleware(store, store.root("s"), retrieved_tokens=retrieved_tokens)
    return [p.fact.body for p in middleware.plan_call([], [], query, 0).injected_pins]


def test_a_call_shows_the_rules_nearest_its_query_as_many_as_its_budget_earns(store: FactStore) -> None:
    root = store.root("s")
    for n, rule in enumerate(RULES):
        store.capture_message(root, rule, message_id=f"r{n}")
    [placed] = store.capture_message(root, "My office is in Lisbon.", message_id="m").facts
    store.pin(placed)  # a pin a person placed goes in whatever the query
    # one rule for every 400 tokens of the retrieved budget, the nearest the query
    assert pinned_rules(store, "What time is the meeting with the design team?", 400) == [
        RULES[0],
        placed.body,
    ]
    shown = pinned_rules(store, "Which library versions do my dependencies need?", 800)
    assert len(shown) == 3 and RULES[1] in shown and shown[-1] == placed.body
    assert pinned_rules(store, "Give me the distances in miles for my trips to Lyon.", 400) == [
        RULES[3],
        placed.body,
    ]
    # a budget that earns them all shows them all, in the order they were said
    assert pinned_rules(store, "What time is the meeting?", 400 * len(RULES)) == [*RULES, placed.body]


# a statement on a rule's subject, with a value in the rule's slot and a cue of change: the
# correction rules once read each as replacing the rule (BEAM's 500K chats: 3 of 290 rules)
RULE_AND_STATEMENT = [
    (
        "Always use APA 7th edition citation style when I ask about formatting references.",
        "I corrected 15 APA citation errors flagged by Zotero on May 7.",
    ),
    (
        "Always round prices to 2 decimal places when I ask about costs.",
        "I changed the prices to 3 decimal places.",
    ),
]


@pytest.mark.parametrize(("rule", "statement"), RULE_AND_STATEMENT)
def test_a_rule_and_a_statement_never_replace_or_outdate_each_other(rule: str, statement: str) -> None:
    for old, new in ((rule, statement), (statement, rule)):
        assert not judge(old, new).supersedes
        assert not same_slot(old, new)  # ranking does not tag either as the older line
        assert not restates(old, new, by_user=True)  # the statement gives a value of its own


def test_the_users_rule_is_no_echo_of_the_users_statement_on_its_subject() -> None:
    # an echo is retired with what it echoes: the statement's ending would take the rule along
    statement = "I'm kinda worried about Scott's progress."
    rule = "Always provide detailed timelines when I ask about Scott's academic progress."
    assert not restates(statement, rule, by_user=True)
    assert not restates(rule, statement, by_user=True)


def test_the_agents_acknowledgement_of_a_rule_is_still_its_echo() -> None:
    rule = "Always round prices to 2 decimal places when I ask about costs."
    assert restates(rule, "Understood: prices will be rounded to 2 decimal places.")


def test_one_rule_still_replaces_another() -> None:
    verdict = judge(
        "Always round prices to 2 decimal places when I ask about costs.",
        "Actually, always round prices to 3 decimal places when I ask about costs.",
    )
    assert verdict.supersedes, verdict.reason


def test_a_statement_on_a_rules_subject_leaves_the_rule_current_and_pinned(store: FactStore) -> None:
    root = store.root("s")
    rule, statement = RULE_AND_STATEMENT[1]
    [said] = store.capture_message(root, rule, message_id="rule").facts
    done = store.capture_message(root, statement, message_id="later")
    assert done.superseded == () and done.proposed == ()
    assert store.get(said.id).status.value == "active"
    assert [p.fact.id for p in store.pinned("s")] == [said.id]


def test_a_rule_said_after_a_statement_on_its_subject_outlives_that_statement(store: FactStore) -> None:
    root = store.root("s")
    [worry] = store.capture_message(root, "I'm kinda worried about Scott's progress.", message_id="m0").facts
    [rule] = store.capture_message(
        root, "Always provide detailed timelines when I ask about Scott's academic progress.", message_id="m1"
    ).facts
    ended = store.capture_message(root, "Scott's progress is no longer a worry for me.", message_id="m2")
    assert [d.old.id for d in ended.superseded] == [worry.id]
    assert store.get(rule.id).status.value == "active"
    assert [p.fact.id for p in store.pinned("s")] == [rule.id]
