"""Capture takes any message: long ones in bounded chunks, text Postgres cannot store cleaned, and a
capture or a recall that fails never fails the turn (nor, with a checkpointer, the thread)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import sql
from psycopg_pool import ConnectionPool

from memory.doors.middleware import CAPTURE_EVENT, INJECTION_EVENT, BeadsMemoryMiddleware
from memory.embedders import FakeEmbedder, MiniLMEmbedder
from memory.graph import earlier_claims
from memory.graph.importing import ImportMessage
from memory.graph.store import CAPTURE_CHUNK_CLAIMS, FactStore
from memory.model import Kind, Status
from memory.postgres.connection import open_pool
from memory.postgres.vectors import as_vector
from memory.rules import clean_text
from memory.rules.splitting import split_message
from memory.scripted import ScriptedChatModel
from tests.plan_helpers import indexes_read

FILLER = "The {n}th delivery of paper cups arrived at dock {n} on time."


def long_message(claims: int) -> str:
    return " ".join(FILLER.format(n=n) for n in range(1, claims + 1))


def test_a_message_of_many_chunks_is_written_whole(store: FactStore) -> None:
    text = long_message(CAPTURE_CHUNK_CLAIMS * 3 + 5)
    ns = store.root("long")
    result = store.capture_message(ns, text, max_chars=None)
    claims = split_message(text)
    assert result.written == len(claims) == CAPTURE_CHUNK_CLAIMS * 3 + 5
    assert [f.body for f in result.facts] == [c.text for c in claims]
    # one passage for the whole message, shared by every claim of every chunk
    assert len({f.passage_id for f in result.facts}) == 1
    assert store.passages([result.facts[0].passage_id]) == {result.facts[0].passage_id: text}
    # and a replay writes nothing
    assert store.capture_message(ns, text, max_chars=None).written == 0


def test_a_message_never_corrects_itself_across_chunks(store: FactStore) -> None:
    # the same claim with another value, a chunk apart: said at once, neither is older than the other
    text = " ".join(
        [
            "Our budget is $100k per year.",
            long_message(CAPTURE_CHUNK_CLAIMS + 10),
            "Our budget is $120k per year.",
        ]
    )
    result = store.capture_message(store.root("self"), text, max_chars=None)
    assert result.superseded == () and result.proposed == ()
    assert all(f.status is Status.ACTIVE for f in store.audit.facts_in_namespace(store.root("self").id))


class FailsOnce(FakeEmbedder):
    """Fails on its `fail_at`th call, as a model server that drops out mid-capture would."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.calls, self.fail_at = 0, fail_at

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise ConnectionError("embedder unreachable")
        return super().embed(texts)


class DropsOnSecondWrite(FactStore):
    """Loses its database on the second chunk's write, as a server that goes away mid-capture would."""

    writes = 0

    def _write(self, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.writes == 2:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return super()._write(*args, **kwargs)


def test_a_capture_stopped_between_chunks_is_completed_by_a_replay(pool: ConnectionPool) -> None:
    flaky = DropsOnSecondWrite(pool, FakeEmbedder())
    flaky.setup()
    ns = flaky.root("resume")
    text = long_message(CAPTURE_CHUNK_CLAIMS * 2)
    with pytest.raises(psycopg.OperationalError):
        flaky.capture_message(ns, text, source_key="m-1", max_chars=None)
    assert len(flaky.audit.facts_in_namespace(ns.id)) == CAPTURE_CHUNK_CLAIMS  # the first chunk landed whole
    again = flaky.capture_message(ns, text, source_key="m-1", max_chars=None)
    assert again.written == CAPTURE_CHUNK_CLAIMS and len(again.facts) == CAPTURE_CHUNK_CLAIMS * 2


def test_an_embedder_failing_mid_message_writes_none_of_it(pool: ConnectionPool) -> None:
    # every chunk is embedded before the first is written: the passage's vector is all its claims' mean
    flaky = FactStore(pool, FailsOnce(fail_at=2))
    flaky.setup()
    ns = flaky.root("embedder-drops")
    text = long_message(CAPTURE_CHUNK_CLAIMS * 2)
    with pytest.raises(ConnectionError):
        flaky.capture_message(ns, text, source_key="m-1", max_chars=None)
    assert flaky.audit.facts_in_namespace(ns.id) == []
    again = flaky.capture_message(ns, text, source_key="m-1", max_chars=None)
    assert again.written == CAPTURE_CHUNK_CLAIMS * 2


def test_a_long_messages_waiting_claims_are_each_read_by_primary_key(pool: ConnectionPool) -> None:
    # While a long message is written its claims wait for the index, and each claim's scan for its
    # nearest earlier claims reads every waiting vector's fact to leave its own message out. In a
    # session the planner's statistics have not seen (an import's first batch beside other chats),
    # it read each of them through the session index, all the session's facts per waiting vector:
    # quadratic for each claim (65 ms at 833 claims, a 256 KB message unfinished after 24 minutes).
    store = FactStore(pool, FakeEmbedder(64), index_in_background=False)
    store.setup()
    store.import_messages(
        "others", [ImportMessage(FILLER.format(n=n), message_id=f"o{n}") for n in range(200)]
    )
    ns = store.root("new")  # after the others' ANALYZE: the statistics know nothing of it
    result = store.capture_message(ns, long_message(CAPTURE_CHUNK_CLAIMS * 2), source_key="m", max_chars=None)
    with pool.connection() as conn, conn.transaction(force_rollback=True):
        # as midway through the message: its claims not yet in the index
        conn.execute(
            "UPDATE beads.fact_vectors v SET indexed = false FROM beads.facts f"
            " WHERE f.id = v.fact_id AND f.session_id = 'new'"
        )
        [vector] = store.embedder.embed([result.facts[-1].body])
        statement = earlier_claims.statement(
            ns, store.embedder_id, store.embedder.dims, correct=True, restate=True, own=True
        )
        params = {
            "q": as_vector(vector),
            "session": "new",
            "ns": ns.id,
            "lineage": list(ns.lineage),
            "speaker": None,
            "at": None,
            "min_sim": 0.0,
            "own": "m:",
        }
        row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + statement, params).fetchone()
        assert row is not None
        looped = indexes_read(row["QUERY PLAN"][0]["Plan"], loops_over=1)
    assert looped & {"fact_vectors_fact", "facts_pkey"}, looped  # the scan did read the waiting claims
    assert not {name for name in looped if name.startswith("facts_")} - {"facts_pkey"}, looped


@pytest.mark.parametrize(
    ("text", "stored", "note"),
    [
        ("Our budget is $100k.\x00", "Our budget is $100k.", "removed 1 NUL character (U+0000)"),
        ("We use Post\x07gres in eu-west-1.", "We use Postgres in eu-west-1.", "removed 1 control character"),
        (
            "Our office is in Z\ud800rich.",
            "Our office is in Z\ufffdrich.",
            "replaced 1 lone surrogate with U+FFFD",
        ),
    ],
)
def test_text_postgres_cannot_store_is_cleaned_and_said(
    store: FactStore, text: str, stored: str, note: str
) -> None:
    result = store.capture_message(store.root("clean"), text)
    assert [f.body for f in result.facts] == [stored] and result.cleaned == (note,)


@pytest.mark.parametrize(
    "text",
    [
        "مرحبا، ميزانيتنا ١٠٠ ألف دولار.",  # right to left
        "Our mascot is 🦙 and the budget is 💵 100k.",
        "Zero\u200bwidth\u200cjoiners\u200d stay as they are.",
        "Tabs\tand\r\nline breaks are text.",
    ],
)
def test_valid_unicode_is_kept_as_it_came(store: FactStore, text: str) -> None:
    result = store.capture_message(store.root("unicode"), text)
    assert result.cleaned == () and result.written >= 1
    assert all(f.body in text for f in result.facts)


def test_the_doors_that_answer_refuse_what_capture_cleans() -> None:
    assert clean_text.problem("a\x00b") and clean_text.problem("a\ud800b")
    assert clean_text.problem("Tabs\tand emoji 🦙 are fine.") is None


def test_a_message_over_the_limit_keeps_its_first_part_at_a_sentence_edge(store: FactStore) -> None:
    text = long_message(400)
    result = store.capture_message(store.root("clip"), text, max_chars=1_000)
    assert result.clipped_from == len(text)
    kept = " ".join(f.body for f in result.facts)
    assert len(kept) <= 1_000 and text.startswith(kept) and kept.endswith("on time.")
    # a store may set its own limit for every capture; by default it keeps all of a message
    assert store.max_message_chars is None
    store.max_message_chars = 1_000
    assert store.capture_message(store.root("clip-store"), text).clipped_from == len(text)


# -- the middleware: the turn goes on whatever capture meets --------------------------------------


def turn(agent: Any, text: str, thread: str, session: str = "s") -> list[dict[str, Any]]:
    config = {"configurable": {"thread_id": thread, "session_id": session}}
    return [c for c in agent.stream({"messages": [HumanMessage(text)]}, config, stream_mode="custom")]


def test_a_nul_byte_breaks_neither_the_turn_nor_the_thread(store: FactStore, pool: ConnectionPool) -> None:
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    model = ScriptedChatModel(replies=["Noted.", "Your budget is $100k."])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)], checkpointer=saver)
    thread = str(uuid.uuid4())
    events = turn(agent, "Our budget is $100k.\x00 We self-host.", thread)
    assert [e["notes"] for e in events if e["type"] == CAPTURE_EVENT] == [
        ["removed 1 NUL character (U+0000)"]
    ]
    events = turn(agent, "What is our budget?", thread)  # the same thread, its checkpoint holding the NUL
    [injection] = [e for e in events if e["type"] == INJECTION_EVENT]
    assert "error" not in injection and [e for e in events if e["type"] == CAPTURE_EVENT] == []
    assert model.prompts[-1][-1].content == "What is our budget?" and len(model.prompts) == 2
    stored = {f.body for f in store.audit.facts_in_namespace(store.root("s").id)}
    assert {"Our budget is $100k.", "We self-host.", "What is our budget?"} <= stored


def test_a_long_message_is_answered_whole_and_captured_in_part(store: FactStore) -> None:
    model = ScriptedChatModel(replies=["Read it all."])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store, max_message_chars=2_000)])
    text = long_message(300)
    events = turn(agent, text, "t-long")
    assert model.prompts[-1][-1].content == text  # the model read every character
    [captured] = [e for e in events if e["type"] == CAPTURE_EVENT]
    assert captured["outcome"] == "clipped" and f"of {len(text)} characters" in captured["notes"][0]
    stored = store.audit.facts_in_namespace(store.root("s").id)
    assert 0 < len(stored) < len(split_message(text)) and sum(len(f.body) for f in stored) <= 2_000


def test_a_capture_that_fails_is_reported_and_retried_and_the_model_answers(pool: ConnectionPool) -> None:
    store = FactStore(pool, FailsOnce(fail_at=1))
    store.setup()
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    model = ScriptedChatModel(replies=["Noted.", "It is $100k."])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)], checkpointer=saver)
    events = turn(agent, "Our budget is $100k per year.", "t-flaky")
    [failed] = [e for e in events if e["type"] == CAPTURE_EVENT]
    assert failed["outcome"] == "failed" and "embedder unreachable" in failed["notes"][0]
    assert len(model.prompts) == 1  # the model was called all the same
    assert store.audit.facts_in_namespace(store.root("s").id) == []
    # nothing lost: the thread's next call captures what the failed one could not
    turn(agent, "What is our budget?", "t-flaky")
    assert "Our budget is $100k per year." in [
        f.body for f in store.audit.facts_in_namespace(store.root("s").id)
    ]


@pytest.fixture
def doomed_url(pg_server_url: str, template_db: str) -> Iterator[str]:
    name = f"doomed_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    yield psycopg.conninfo.make_conninfo(pg_server_url, dbname=name)
    with psycopg.connect(pg_server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_with_the_database_gone_the_model_answers_without_a_block(
    pg_server_url: str, doomed_url: str
) -> None:
    with open_pool(doomed_url, timeout=2) as pool:
        store = FactStore(pool, FakeEmbedder())
        store.setup()
        model = ScriptedChatModel(replies=["Noted.", "I can't recall that right now."])
        agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
        turn(agent, "Our budget is $100k per year.", "t-1")
        name = psycopg.conninfo.conninfo_to_dict(doomed_url)["dbname"]
        with psycopg.connect(pg_server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(name))))
        events = turn(agent, "What is our budget?", "t-2")
    [injection] = [e for e in events if e["type"] == INJECTION_EVENT]
    assert injection["error"].startswith("memory unavailable") and injection["block"] == ""
    assert len(model.prompts) == 2 and model.prompts[-1][-1].content == "What is our budget?"


def test_a_correction_retires_only_the_claim_it_addresses(store: FactStore) -> None:
    ns = store.root("walkthrough")
    store.capture_message(ns, "Our budget is $100k per year and it must be self-hostable.", source_key="m1")
    corrected = store.capture_message(ns, "Correction: the budget is now $120k.", source_key="m2")
    assert [a.old.body for a in corrected.superseded] == ["Our budget is $100k per year"]
    active = {f.body for f in store.audit.facts_in_namespace(ns.id) if f.status is Status.ACTIVE}
    assert "it must be self-hostable." in active
    hits = store.search(ns, "does it need to be self-hostable?").hits
    assert "it must be self-hostable." in [h.fact.body for h in hits]


@pytest.mark.parametrize(
    ("said", "correction", "retired", "standing"),
    [
        # capture splits these shapes, so the correction finds the budget claim alone
        (
            "Our budget is $100k per year, but it must be self-hostable.",
            "Correction: the budget is now $120k.",
            "Our budget is $100k per year",
            ["it must be self-hostable."],
        ),
        (
            "Our budget is $100k per year; also it must be self-hostable.",
            "Correction: the budget is now $120k.",
            "Our budget is $100k per year",
            ["also it must be self-hostable."],
        ),
        # these stay one claim at capture: the correction retires it and keeps the rest standing
        (
            "Budget is $100k per year, self-hostable, and SOC 2 compliant.",
            "Correction: our budget is $120k per year.",
            "Budget is $100k per year, self-hostable, and SOC 2 compliant.",
            ["self-hostable, and SOC 2 compliant."],
        ),
        (
            "We have a $100k budget and a team of 5 engineers.",
            "Correction: our budget is $120k per year.",
            "We have a $100k budget and a team of 5 engineers.",
            ["a team of 5 engineers."],
        ),
        (
            "Our team offsite this spring is in Porto, the second week of May.",
            "Heads up: the offsite got moved to Lisbon, same week.",
            "Our team offsite this spring is in Porto, the second week of May.",
            ["the second week of May."],
        ),
    ],
)
def test_a_correction_leaves_standing_what_it_does_not_address(
    pool: ConnectionPool,
    minilm: MiniLMEmbedder,
    said: str,
    correction: str,
    retired: str,
    standing: list[str],
) -> None:
    store = FactStore(pool, minilm)  # the offline default's similarities decide what is compared
    store.setup()
    ns = store.root("s")
    store.capture_message(ns, said, source_key="m1")
    [auto] = store.capture_message(ns, correction, source_key="m2").superseded
    assert auto.old.body == retired and auto.old.status is Status.SUPERSEDED
    active = {f.body for f in store.audit.facts_in_namespace(ns.id) if f.status is Status.ACTIVE}
    assert set(standing) <= active and retired not in active
    if auto.old.body != said.split(",")[0].split(";")[0]:  # split at the correction, not at capture
        assert [f.body for f in auto.kept] == standing
        [kept] = auto.kept
        # where it came from: the original's message, its time, an edge to the original
        assert kept.passage_id is not None and store.passages([kept.passage_id])[kept.passage_id] == said
        assert kept.valid_from == auto.old.valid_from
        assert kept.span is not None and said[kept.span[0] : kept.span[1]] == kept.body
        assert (kept.id, "derived_from", auto.old.id) in store.audit.edges(kept)
        assert kept.body in [h.fact.body for h in store.search(ns, standing[0]).hits]
        # the block shows a part without its message, which still says the replaced value
        assert store.standing_passages([kept.passage_id]) == {}
    # the stale value is nowhere current, and a replay writes nothing
    assert not any("$100k" in body for body in active)
    assert store.capture_message(ns, correction, source_key="m2").written == 0
    assert {f.body for f in store.audit.facts_in_namespace(ns.id) if f.status is Status.ACTIVE} == active


def test_a_correction_of_a_value_the_remainder_also_states_retires_it_whole(store: FactStore) -> None:
    ns = store.root("s")
    store.capture_message(ns, "The standup is on Monday, at 10am.", source_key="m1")
    [auto] = store.capture_message(ns, "The standup moved to Tuesday at 11am.", source_key="m2").superseded
    assert auto.kept == ()
    assert not any(
        "10am" in f.body for f in store.audit.facts_in_namespace(ns.id) if f.status is Status.ACTIVE
    )


def test_a_sub_agents_return_is_not_stored_beside_its_summary(store: FactStore) -> None:
    from memory.doors.subagents import make_subagent_tool
    from memory.scripted import calls, tool_call

    model = ScriptedChatModel(
        replies=[
            calls(tool_call("delegate_research", task="Is Qdrant self-hostable?", researcher="r_qdrant")),
            calls(tool_call("conclude_task", summary="Qdrant can be self-hosted.")),
            "Done.",
            "It can.",
        ],
        fallback="ok",
    )
    delegate = make_subagent_tool(store, None, model, [])
    agent = create_agent(model, tools=[delegate], middleware=[BeadsMemoryMiddleware(store)])
    agent.invoke(
        {"messages": [HumanMessage("Research Qdrant.")]},
        {"configurable": {"thread_id": "t", "session_id": "s"}},
    )
    bodies = [f.body for f in store.audit.facts_in_namespace(store.root("s").id)]
    assert "Qdrant can be self-hosted." in bodies
    assert not [b for b in bodies if "Qdrant can be self-hosted." in b and b != "Qdrant can be self-hosted."]


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("Our budget is $100k.\x00 We self-host.", "cleaned"),
        ("Our office is in Z\ud800rich.", "cleaned"),
        ("We use Post\x07gres\x1b in eu-west-1.", "cleaned"),
        ("مرحبا، ميزانيتنا ١٠٠ ألف دولار.", None),
        ("Our mascot is 🦙 and the budget is 💵 100k.", None),
        ("Zero\u200bwidth\u200cjoiners\u200d stay as they are.", None),
    ],
)
def test_any_text_is_answered_and_captured_through_the_middleware(
    store: FactStore, pool: ConnectionPool, text: str, outcome: str | None
) -> None:
    saver = PostgresSaver(pool)  # type: ignore[arg-type]
    saver.setup()
    model = ScriptedChatModel(replies=["Noted.", "Answered."])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)], checkpointer=saver)
    events = turn(agent, text, "t-any")
    assert [e["outcome"] for e in events if e["type"] == CAPTURE_EVENT] == ([outcome] if outcome else [])
    assert model.prompts[-1][-1].content == text  # the model got the message as it was sent
    turn(agent, "And then?", "t-any")  # the thread goes on
    assert len(model.prompts) == 2 and store.audit.facts_in_namespace(store.root("s").id)


def test_a_database_never_set_up_says_to_run_setup(empty_db_url: str) -> None:
    from memory.errors import SchemaMissingError

    with open_pool(empty_db_url) as pool:
        store = FactStore(pool, FakeEmbedder())
        with pytest.raises(SchemaMissingError, match=r"run store.setup\(\)"):
            store.audit.session_facts("s")


def test_an_acknowledgement_that_says_the_user_back_is_no_conclusion(store: FactStore) -> None:
    model = ScriptedChatModel(
        replies=[
            "Got it! Your budget is $100k per year and it must be self-hostable. Let me know how I can help!",
            "With $100k a year, a self-hosted GitLab on two servers fits.",
        ]
    )
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
    turn(agent, "Our budget is $100k per year. It must be self-hostable.", "t1")
    turn(agent, "What could we run?", "t2")
    facts = store.audit.facts_in_namespace(store.root("s").id)
    # the user's two claims once each; the answer that adds something is a conclusion, the echo is not
    assert sorted(f.body for f in facts if f.kind is Kind.CONCLUSION) == [
        "With $100k a year, a self-hosted GitLab on two servers fits."
    ]
    assert sum("$100k" in f.body for f in facts if f.kind is Kind.USER_INPUT) == 1


def test_a_chat_said_again_on_new_threads_writes_nothing_new(store: FactStore) -> None:
    chat = [
        "I'm vegetarian.",
        "Our budget is $100k per year. It must be self-hostable.",
        "What's a good name for a cat?",
    ]
    ns = store.root("s")
    first = [
        store.capture_message(ns, text, message_id=f"run1-{n}", thread_id="a") for n, text in enumerate(chat)
    ]
    again = [
        store.capture_message(ns, text, message_id=f"run2-{n}", thread_id="b") for n, text in enumerate(chat)
    ]
    assert [r.written for r in again] == [0, 0, 0]
    # each says which facts it maps to: the ones the first run wrote
    assert [[f.id for f in r.facts] for r in again] == [[f.id for f in r.facts] for r in first]
    assert len(store.audit.facts_in_namespace(ns.id)) == sum(r.written for r in first)
    # the same claim inside another message is news of its own, and so is the old value said again
    # once it was replaced
    assert store.capture_message(ns, "I'm vegetarian. I also cook a lot.", message_id="m3").written == 2
    store.capture_message(ns, "Correction: our budget is now $120k per year.", message_id="m4")
    back = store.capture_message(
        ns, "Our budget is $100k per year. It must be self-hostable.", message_id="m5"
    )
    assert back.written == 1  # the budget claim again; the constraint it came with is still current
    assert [f.body for f in back.facts] == ["Our budget is $100k per year.", "It must be self-hostable."]


def test_a_chat_replayed_through_the_middleware_on_new_threads_writes_nothing_new(store: FactStore) -> None:
    replies = ["Noted, a vegetarian in Lisbon.", "A vegetarian lasagne."]
    model = ScriptedChatModel(replies=[*replies, *replies])
    agent = create_agent(model, tools=[], middleware=[BeadsMemoryMiddleware(store)])
    turn(agent, "I'm vegetarian and I live in Lisbon.", "t1")
    turn(agent, "What should I cook tonight?", "t2")
    count = len(store.audit.facts_in_namespace(store.root("s").id))
    turn(agent, "I'm vegetarian and I live in Lisbon.", "t3")
    turn(agent, "What should I cook tonight?", "t4")
    bodies = [f.body for f in store.audit.facts_in_namespace(store.root("s").id)]
    assert len(bodies) == count and len(set(bodies)) == count
