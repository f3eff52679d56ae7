"""The classifier bench's own parts: capture's candidate search in memory, and the model it fits."""

from __future__ import annotations

from bench.contradiction_model import Vectors
from bench.correction_classifier import Candidate, Classifier, candidates, pair_features
from memory.embedders.fake import FakeEmbedder


def test_candidates_are_earlier_claims_of_the_same_speaker_that_a_value_claim_meets() -> None:
    turns = [
        ("1", "ann", "My rent is $1,450 a month."),
        ("2", "bob", "My rent is $900 a month."),
        ("3", "ann", "Could you help me plan a trip?"),  # a request: never a candidate either way
        ("4", "ann", "The landlord raised my rent to $1,600."),
    ]
    found = candidates(turns, Vectors(FakeEmbedder()), floor=-1.0)
    assert len(found) == 1
    assert [(c.old_turn, c.new_turn) for c in found[0]] == [("1", "4")]


def test_the_classifier_learns_what_the_features_separate() -> None:
    def pair(old: str, new: str) -> Candidate:
        return Candidate(old, new, 0.6, "new", "old")

    corrections = [
        pair("My rent is $1,450 a month.", "Actually my rent is $1,600 a month."),
        pair("The standup is at 9am.", "Correction: the standup moved to 10am."),
        pair("We use Jira.", "We switched from Jira to Linear."),
    ]
    lookalikes = [
        pair("My rent is $1,450 a month.", "My sister's rent is $2,000 a month."),
        pair("The standup is at 9am.", "The retro is at 3pm."),
        pair("We use Jira.", "I used to use Trello back in 2019."),
    ]
    model = Classifier(Vectors(FakeEmbedder()), embedding=False)
    model.fit([(c, True, 1.0) for c in corrections] + [(c, False, 1.0) for c in lookalikes])
    assert min(map(model.score, corrections)) > max(map(model.score, lookalikes))
    assert len(pair_features("a", "b", 0.5)) == len(model.row(corrections[0]))
