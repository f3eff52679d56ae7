"""Every arm against real Postgres on handmade conversations: budgets, evidence, knowledge updates, abstention."""

from __future__ import annotations

import inspect
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from eval_samples import write_beam, write_locomo

import memory
from bench.eval import ingest
from bench.eval.arms import FactsArm
from bench.eval.conversation import Conversation, Dataset, Question
from bench.eval.loaders import load_beam, load_locomo
from bench.eval.metrics import window_metrics
from bench.eval.runner import Stores, make_arm, open_stores
from bench.eval.tokens import count_tokens
from bench.eval.window import TAIL_TITLE, ConversationView, Window, asked_at
from memory.embedders import FakeEmbedder
from memory.graph.importing import ImportMessage
from memory.graph.store import FactStore
from memory.model import Status

pytestmark = pytest.mark.bench


ARMS = ("tail", "docstore", "bm25", "facts")


@pytest.fixture
def stores(db_url: str) -> Iterator[Stores]:
    # 256 dimensions: unrelated texts stay well under the relevance floor (at 64, chance reaches 0.3)
    with open_stores(db_url, FakeEmbedder(256)) as s:
        yield s


def ingested(stores: Stores, dataset: Dataset) -> Conversation:
    [conversation] = dataset.conversations
    stats = stores.ingestor.ingest(conversation)
    assert not stats.cached and stats.documents == len(conversation.turns)
    return conversation


def windows(stores: Stores, conversation: Conversation, question: Question, budget: int) -> dict[str, Window]:
    view = ConversationView(conversation)
    return {name: make_arm(name, stores).window(view, question, budget) for name in ARMS}


def test_no_arm_ever_exceeds_its_budget(stores: Stores, tmp_path: Path) -> None:
    for dataset in (load_locomo(write_locomo(tmp_path)), load_beam(write_beam(tmp_path))):
        conversation = ingested(stores, dataset)
        view = ConversationView(conversation)
        arms = {name: make_arm(name, stores) for name in (*ARMS, "full")}
        total = sum(view.tokens.values()) + count_tokens(TAIL_TITLE)
        for question in conversation.questions:
            for budget in (15, 40, 90, 200, 1200):
                for name in ARMS:
                    window = arms[name].window(view, question, budget)
                    assert window.tokens == count_tokens(window.text) <= budget, (name, budget, question.id)
                    assert len({i.priority for i in window.items}) == len(window.items)
            full = arms["full"].window(view, question, None)
            assert full.budget is None and full.all_turns and full.tokens == count_tokens(full.text) == total
            assert {i.turn_id for i in full.items} == {t.id for t in conversation.turns}


def test_the_tail_clips_its_oldest_turn_to_fill_the_budget(stores: Stores, tmp_path: Path) -> None:
    conversation = load_locomo(write_locomo(tmp_path)).conversations[0]
    window = make_arm("tail", stores).window(ConversationView(conversation), conversation.questions[0], 100)
    assert window.tokens == 100 and window.items[-1].clipped
    assert window.items[0].turn_id == conversation.turns[-1].id  # newest first by priority
    assert window.text.index(conversation.turns[-1].text) > window.text.index("…")  # but read oldest first


def test_evidence_recall_on_a_handmade_conversation(stores: Stores, tmp_path: Path) -> None:
    conversation = ingested(stores, load_locomo(write_locomo(tmp_path)))
    cat = next(q for q in conversation.questions if q.question == "What is the name of Ana's cat?")
    got = {name: window_metrics(w, cat) for name, w in windows(stores, conversation, cat, 150).items()}
    # the cat was mentioned in the first turn: no 150-token tail reaches back that far
    assert got["tail"]["hit_any"] is False
    assert got["facts"]["hit_any"] and got["docstore"]["hit_any"] and got["bm25"]["hit_any"]
    # the facts arm found it as a fact carved from turn D1:1
    facts_window = windows(stores, conversation, cat, 150)["facts"]
    carved = [i for i in facts_window.items if i.turn_id == "D1:1"]
    assert carved and carved[0].fact_id is not None
    full = make_arm("full", stores).window(ConversationView(conversation), cat, None)
    assert window_metrics(full, cat)["hit_all"]
    pair = next(q for q in conversation.questions if q.question == "Cat and climbing?")
    tail_row = window_metrics(
        make_arm("tail", stores).window(ConversationView(conversation), pair, 150), pair
    )
    assert (tail_row["hit_any"], tail_row["hit_all"]) == (False, False)


def test_knowledge_update_is_resolved_by_capture_and_ordered_by_time_when_unlinked(
    stores: Stores, tmp_path: Path
) -> None:
    conversation = ingested(stores, load_beam(write_beam(tmp_path)))
    ku = next(q for q in conversation.questions if q.type == "knowledge_update")
    view = ConversationView(conversation)
    # a budget whose tail shows the update (turn 20) but not the original value (turn 2)
    needed = count_tokens(TAIL_TITLE) + view.tokens["20"] + view.tokens["21"]
    arm = FactsArm(stores.facts, stores.ingestor.root)
    [stale] = [f for f in stores.facts.audit.session_facts(conversation.id) if f.message_id == "2"]
    [current] = [f for f in stores.facts.audit.session_facts(conversation.id) if f.message_id == "20"]
    # capture saw "5 engineers" restated as "7 engineers ... now" and superseded it by itself
    assert stores.facts.get(stale.id).status is Status.SUPERSEDED
    assert stores.facts.get(stale.id).head_id == current.id
    row = window_metrics(arm.window(view, ku, 4 * needed), ku)
    assert not row["ku_stale_present"] and row["ku_current_present"]

    # undone, both claims are current and unlinked: the stale one is shown, but below the newer one
    stores.facts.undo_supersede(current, stale)
    tail_ids = [i.turn_id for i in arm.window(view, ku, 4 * needed).items if i.fact_id is None]
    assert "20" in tail_ids and "2" not in tail_ids
    after = window_metrics(FactsArm(stores.facts, stores.ingestor.root).window(view, ku, 4 * needed), ku)
    assert after["ku_stale_as_current"] and after["ku_current_present"]


def test_abstention_signal_of_each_retrieving_arm(stores: Stores, tmp_path: Path) -> None:
    conversation = ingested(stores, load_beam(write_beam(tmp_path)))
    alien = Question(
        "alien", conversation.id, "abstention", "Quixotic zebras juggle xylophones?", "-", abstention=True
    )
    known = Question(
        "known", conversation.id, "information_extraction", "Where do we deploy the tracker?", "VPS"
    )
    for question, expected in ((alien, True), (known, False)):
        got = windows(stores, conversation, question, 300)
        assert got["tail"].nothing_relevant is None  # a transcript has no such signal
        for name in ("facts", "docstore", "bm25"):
            assert got[name].nothing_relevant is expected, (name, question.id, got[name].best_score)
    # the facts arm's signal ignores what the tail already shows: a budget that fits everything
    # leaves nothing to search for, yet memory does hold the answer
    assert windows(stores, conversation, known, 5000)["facts"].nothing_relevant is False


def test_ingestion_is_cached_by_fingerprint(stores: Stores, tmp_path: Path) -> None:
    conversation = ingested(stores, load_locomo(write_locomo(tmp_path, filler_sessions=1, own_filler=True)))
    facts_before = len(stores.facts.audit.session_facts(conversation.id))
    assert stores.ingestor.ingest(conversation).cached
    # a changed conversation is re-ingested from scratch
    changed = load_locomo(write_locomo(tmp_path, filler_sessions=2, own_filler=True)).conversations[0]
    stats = stores.ingestor.ingest(changed)
    assert not stats.cached and stats.turns == len(changed.turns)
    assert len(stores.facts.audit.session_facts(conversation.id)) > facts_before
    assert len(stores.docs.search(("eval", conversation.id), limit=1000)) == len(changed.turns)


def test_ingestion_is_redone_when_the_code_capture_runs_changes(
    stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversation = ingested(stores, load_locomo(write_locomo(tmp_path)))
    assert stores.ingestor.ingest(conversation).cached
    dataset = load_locomo(write_locomo(tmp_path))
    database = ingest.dataset_database(dataset, "minilm")
    monkeypatch.setattr(ingest, "write_path_digest", lambda: "another capture")
    assert not stores.ingestor.ingest(conversation).cached
    # and a run of another version of capture writes a database of its own
    assert ingest.dataset_database(dataset, "minilm") != database


def test_two_runs_opening_one_new_database_set_it_up_one_after_the_other(db_url: str) -> None:
    # a tune and a holdout run started together both ran PostgresStore's migrations, and one failed
    # on the other's row of store_migrations: setup now waits for any other run's
    ready = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with open_stores(db_url, FakeEmbedder(256)):
                ready.set()
        except BaseException as exc:  # the assertion below names it
            failed.append(exc)
            ready.set()

    with psycopg.connect(db_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(hashtext('beads_eval.setup'))")
        worker = threading.Thread(target=run)
        worker.start()
        assert not ready.wait(1.0)  # another run's setup holds it
        other.execute("SELECT pg_advisory_unlock(hashtext('beads_eval.setup'))")
        worker.join(120)
    assert ready.is_set() and not failed, failed


def test_the_write_path_digest_reads_what_capture_may_run_and_nothing_else(tmp_path: Path) -> None:
    library = tmp_path / "memory"
    shutil.copytree(Path(memory.__file__).parent, library, ignore=shutil.ignore_patterns("__pycache__"))
    before = ingest.source_digest(library)
    assert before == ingest.write_path_digest()
    # the block, the doors and search's own steps only read what is stored
    for reader in (
        "context/block.py",
        "doors/middleware.py",
        "retrieval/statement.py",
        "retrieval/ranking.py",
    ):
        (library / reader).write_text((library / reader).read_text() + "\n# changed\n")
    assert ingest.source_digest(library) == before
    # a rule, a migration, the vocabulary or the thresholds' defaults may change a row
    for writer in ("rules/splitting.py", "model.py", "retrieval/options.py"):
        edited = tmp_path / writer.replace("/", "-")
        shutil.copy(library / writer, edited)
        (library / writer).write_text((library / writer).read_text() + "\n# changed\n")
        assert ingest.source_digest(library) != before, writer
        shutil.copy(edited, library / writer)
    migration = next((library / "migrations").glob("*.sql"))
    migration.write_text(migration.read_text() + "\n-- changed\n")
    assert ingest.source_digest(library) != before


def test_capture_never_runs_the_search_steps_the_digest_leaves_out(
    store: FactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what lets the digest leave search's own steps out: an import and a capture, corrections and
    # restatements included, run with every function of those modules made to fail, wherever it
    # was imported to
    steps = [
        sys.modules[f"memory.{m.removesuffix('.py').replace('/', '.')}"] for m in ingest._READ_ONLY_MODULES
    ]
    doomed = {
        id(f) for m in steps for f in vars(m).values() if inspect.isfunction(f) and f.__module__ == m.__name__
    }

    def searched(*args: object, **kwargs: object) -> None:
        raise AssertionError("capture ran a search step")

    for module in [m for name, m in sys.modules.items() if name.startswith("memory")]:
        for name, value in list(vars(module).items()):
            if id(value) in doomed:
                monkeypatch.setattr(module, name, searched)
    said = [
        ImportMessage("The budget is $100k per year. The deploy region is eu-west-1.", message_id="m1"),
        ImportMessage("Noted, the budget is $100k.", role="assistant", message_id="m2"),
        ImportMessage("Actually the budget is $120k per year.", message_id="m3"),
        ImportMessage("The budget is $120k per year.", message_id="m4"),
    ]
    report = store.import_messages("s", said)
    store.capture_message(store.root("s"), "Correction: the deploy region is us-east-2.")
    assert report.written >= 4 and report.superseded >= 1
    with pytest.raises(AssertionError, match="search step"):
        store.search(store.root("s"), "budget")  # the patching reaches search


# -- asking at the moment of the evidence, and the injection gate ----------------------------------


def test_a_question_asked_at_its_evidence_sees_no_later_turn(stores: Stores, tmp_path: Path) -> None:
    conversation = ingested(stores, load_locomo(write_locomo(tmp_path)))
    full = ConversationView(conversation)
    cat = next(q for q in conversation.questions if q.question == "What is the name of Ana's cat?")
    view = asked_at(full, cat, "evidence")
    first_session = {t.id for t in conversation.sessions[0].turns}
    assert set(view.lines) == first_session
    assert view.hidden == frozenset(set(full.lines) - first_session)
    assert view.history_tokens == sum(full.tokens[t] for t in first_session)
    assert asked_at(full, cat, "end") is full
    broken = next(q for q in conversation.questions if q.question == "Broken evidence?")
    assert asked_at(full, broken, "evidence") is full  # no evidence: asked at the end
    for name in ("facts", "docstore", "bm25"):
        window = make_arm(name, stores).window(view, cat, 1200)
        assert {i.turn_id for i in window.items} <= first_session, name


def test_the_docstore_sizes_its_first_search_from_the_turns_said_so_far(
    stores: Stores, tmp_path: Path
) -> None:
    conversation = ingested(stores, load_locomo(write_locomo(tmp_path)))
    cat = next(q for q in conversation.questions if q.question == "What is the name of Ana's cat?")
    early = asked_at(ConversationView(conversation), cat, "evidence")
    assert len(early.hidden) > len(early.tokens)  # most of the conversation comes after the question
    window = make_arm("docstore", stores, budgets=(1200,)).window(early, cat, 1200)
    assert window_metrics(window, cat)["hit_any"]
    assert {i.turn_id for i in window.items} <= set(early.lines)


def test_the_gated_arm_is_the_transcript_while_it_fits_and_the_facts_arm_after(
    stores: Stores, tmp_path: Path
) -> None:
    conversation = ingested(stores, load_locomo(write_locomo(tmp_path)))
    full = ConversationView(conversation)
    cat = next(q for q in conversation.questions if q.question == "What is the name of Ana's cat?")
    gated, facts, tail = (make_arm(n, stores) for n in ("facts_gated", "facts", "tail"))
    fits = full.history_tokens + count_tokens(TAIL_TITLE)
    # the whole conversation fits: nothing injected, the window is the transcript
    roomy = gated.window(full, cat, fits + 50)
    assert roomy.text == tail.window(full, cat, fits + 50).text
    assert roomy.tokens == fits < roomy.budget
    assert all(i.fact_id is None for i in roomy.items)
    # it does not fit: the facts arm's window, under the gated arm's name
    tight = gated.window(full, cat, 150)
    same = facts.window(full, cat, 150)
    assert (tight.arm, tight.text, tight.tokens) == ("facts_gated", same.text, same.tokens)
    assert window_metrics(tight, cat)["hit_any"]


def test_asking_later_draws_a_fixed_session_between_the_evidence_and_the_end(tmp_path: Path) -> None:
    conversation = load_locomo(write_locomo(tmp_path, filler_sessions=6)).conversations[0]
    full = ConversationView(conversation)
    drawn = set()
    for question in conversation.questions:
        view = asked_at(full, question, "later")
        assert asked_at(full, question, "later").lines == view.lines  # fixed per question
        assert set(question.evidence_ids) <= set(view.lines)
        drawn.add(len(view.conversation.sessions))
    assert len(drawn) > 1  # not always the same moment
