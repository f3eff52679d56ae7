"""Automatic supersession at capture: a user's new claim that gives an earlier claim's slot another
value replaces it, in the capture's own transaction, with no model call.

For each new user claim that states a value or ends a state (memory.rules.corrections decides what that
is), the nearest earlier claims (memory.graph.earlier_claims, read in the round trip of the capture's
INSERTs) are compared with it: active current user claims of the namespace it was captured in, said
no later than it, by the same speaker (where a session records speakers), at least as close as the
supersede guard requires. Only the same namespace: a sub-agent's task is captured in its own, and
must never retire the supervisor's facts (corrections across namespaces stay with remember_fact and
rollups). Each that `corrections.judge` says it replaces (the old value said twice is two claims) is
superseded through the guarded `revisions.supersede`, and the edge records that it was automatic and
why; or, where the rule is one of PROPOSING_RULES, proposed. Where the rules cannot decide, nothing
is written and ranking orders the two (memory.rules.slots).

A replaced claim that still held several ("Budget is $100k per year, self-hostable, and SOC 2
compliant.") is retired only in the part the correction addresses: the parts it leaves standing
(memory.rules.corrections.parts) are written as facts of their own, verbatim, with the original's message as
their passage and a derived_from edge to it (`keep_standing`).

Only the user's own claims take part on either side: a tool result or a web page never supersedes
(memory.graph.facts refuses it anyway), and an agent's conclusions are not the user's statements.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import DictRow

from memory.errors import BeadsMemoryError
from memory.graph import earlier_claims, revisions
from memory.graph import facts as fact_sql
from memory.graph.facts import NewFact, Provenance
from memory.ids import passage_id
from memory.model import AutoSupersession, Fact, Kind, Namespace, Source
from memory.rules import corrections
from memory.rules.corrections.parts import standing

# earlier claims compared with each new one, nearest first, of the namespace's nearest claims
# (memory.graph.earlier_claims scans earlier_claims.SCANNED)
CANDIDATES = 5
# Two short claims are judged down to this similarity (MiniLM's scale; memory.graph.thresholds has each
# embedder's), longer ones only from the guard's up. A short message says one thing, so the rules read
# it reliably, while its embedding is mostly the words around the value: "I live in Austin" / "We
# moved to Denver last month" is 0.30, "The project codename is Falcon" / "Leadership renamed the
# project to Osprey" 0.35. Long claims out of long chats keep the guard: at 0.40 for them, BEAM's
# whole chats gained automatic edges that were nearly all wrong (results/supersession/README.md).
SHORT_CLAIM_MIN_SIMILARITY = 0.30
# what capture writes: a deliberate remember() names what it supersedes itself
_USER_SOURCES = frozenset({Source.PASSIVE_CAPTURE})
# A rule whose automatic edges, read by hand, were right less often than this writes none: it
# proposes instead, for a person to accept or dismiss (`rule_of` names the rules, with the length of
# the two messages; results/supersession/edge-audit/ holds the reading, and `python -m
# bench.edge_audit` its command). Between long messages (BEAM's chats) every rule read fell below;
# between short ones, as people type in a chat, none did.
MIN_RULE_PRECISION = 0.9
# Short messages (memory.rules.corrections.short_message): both at most SHORT_MESSAGE_WORDS words and
# SHORT_MESSAGE_CHARS characters (capture reads no more of an earlier message than tells this,
# memory.graph.earlier_claims.MESSAGE_CHARS)
SHORT_MESSAGE_WORDS = corrections.SHORT_MESSAGE_WORDS
SHORT_MESSAGE_CHARS = corrections.SHORT_MESSAGE_CHARS
PROPOSING_RULES: frozenset[str] = frozenset(
    f"{rule}, long messages"
    for rule in (
        "named what it replaced",
        "same words, another value",
        "same statement, another value",
        "state ended",
        "strong cue",
        "weak cue",
        "old value named",
        "other",
    )
)


def may_correct(fact: Fact | NewFact) -> bool:
    """Worth comparing with earlier claims: a user's claim that states a value or ends a state."""
    if fact.kind is not Kind.USER_INPUT or fact.source not in _USER_SOURCES:
        return False
    return corrections.states_something(fact.body)


@dataclass(frozen=True, slots=True)
class Applied:
    """What capture's supersession did: its replacements (and proposals), and every fact whose
    chain now ends at another head (the replaced claims and the echoes retired with them)."""

    done: list[AutoSupersession]
    new_heads: dict[uuid.UUID, uuid.UUID]


def apply(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    new_facts: Sequence[Fact],
    nearest: Mapping[uuid.UUID, earlier_claims.Nearest],
    embedder_id: int,
    min_similarity: float,
    short_similarity: float | None = None,
    messages: Mapping[uuid.UUID, str] | None = None,
    embed: Callable[[Sequence[str]], Sequence[Sequence[float]]] | None = None,
) -> Applied:
    """Supersede what `new_facts` (just written into `ns`, inside the caller's transaction) correct,
    or propose it where the rule that decided is one of PROPOSING_RULES. `nearest`: each new fact's
    nearest earlier claims (memory.graph.earlier_claims, read with the facts' INSERTs). Candidates must be
    `min_similarity` close, or `short_similarity` when both claims are short. `messages`: each new
    fact's whole message (its passage, or itself), which names the rule by its length. `embed`: the
    store's embedder, for the parts of a replaced claim its correction leaves standing (without it,
    the whole claim is replaced)."""
    short_similarity = min_similarity if short_similarity is None else min(short_similarity, min_similarity)
    done: list[AutoSupersession] = []
    new_heads: dict[uuid.UUID, uuid.UUID] = {}
    # written together once every fact is judged: one statement for all of a capture's proposals
    to_propose: list[tuple[Fact, uuid.UUID, str]] = []
    for fact in new_facts:
        if fact.id not in nearest or not may_correct(fact):
            continue
        retired = {d.old.id for d in done if not d.proposed}
        for row in nearest[fact.id].to_correct(short_similarity, CANDIDATES):
            if row.id in retired:
                continue
            accepted = accept(row.body, fact.body, row.sim, min_similarity, short_similarity)
            if accepted is None:
                continue
            verdict, close_enough = accepted
            said = (messages or {}).get(fact.id, fact.body)
            if rule_of(verdict.reason, row.message, said) in PROPOSING_RULES:
                to_propose.append((fact, row.id, verdict.reason))
                continue
            try:
                superseded = revisions.supersede_with_echoes(
                    conn,
                    fact.id,
                    row.id,
                    embedder_id,
                    close_enough,
                    reason=verdict.reason,
                    automatic=True,
                )
            except BeadsMemoryError:
                continue  # the guard said no after all (a cycle, an archived target): leave both
            # and on: the old value said twice ("I'm on 50mg" ... "I take my 50mg with breakfast") is
            # two earlier claims, each judged, each replaced
            kept = () if embed is None else keep_standing(conn, ns, fact, superseded.old, embed, embedder_id)
            done.append(AutoSupersession(fact, superseded.old, verdict.reason, kept=tuple(kept)))
            _moved(new_heads, (superseded.old.id, *superseded.echoes), fact.id)
    proposed = revisions.propose(
        conn, ns.session_id, [(new.id, old_id, why) for new, old_id, why in to_propose]
    )
    done.extend(
        AutoSupersession(new=new, old=proposed[new.id, old_id], reason=why, proposed=True)
        for new, old_id, why in to_propose
        if (new.id, old_id) in proposed
    )
    return Applied(done, new_heads)


def keep_standing(
    conn: psycopg.Connection[DictRow],
    ns: Namespace,
    new: Fact,
    old: Fact,
    embed: Callable[[Sequence[str]], Sequence[Sequence[float]]],
    embedder_id: int,
) -> list[Fact]:
    """Write the parts of `old` (a fact of `ns`), just replaced by `new`, that `new` does not address,
    as facts of their own (in the caller's transaction): the same kind, source, speaker, message and time as
    `old`, its message as their passage (and as `old`'s, where it was its whole message), a
    derived_from edge to it. Keyed by `old` and their offset, so a replay writes nothing. Returns the
    facts written."""
    spans = standing(old.body, new.body)
    if not spans:
        return []
    row = conn.execute(
        "SELECT f.source_key, p.body AS passage FROM beads.facts f"
        " LEFT JOIN beads.passages p ON p.id = f.passage_id WHERE f.id = %s",
        (old.id,),
    ).fetchone()
    assert row is not None  # locked and updated by the supersede just before
    # the message they were said in: the passage the old claim was cut from, or the claim itself
    whole = row["passage"] or old.body
    texts = [old.body[a:b] for a, b in spans]
    vecs = list(embed(texts if row["passage"] else [*texts, whole]))
    passage_vector = None if row["passage"] else vecs[-1]
    # a span is in its passage's coordinates; a claim that was its whole message is its own passage
    offset = old.span[0] if row["passage"] and old.span else 0
    items = [
        NewFact(
            body=text,
            kind=old.kind,
            source=old.source,
            source_key=f"{row['source_key']}/{a}",
            claim_vector=vec,
            passage=whole,
            passage_vector=passage_vector,
            span=(offset + a, offset + b),
            metadata={**old.metadata, "kept_from": str(old.id)},
        )
        for (a, b), text, vec in zip(spans, texts, vecs, strict=False)
    ]
    written = fact_sql.queue_facts(conn, ns, items, Provenance.of_fact(old), embedder_id).written()
    if written and row["passage"] is None:
        # the replaced claim was its whole message, which is now stored as the passage its parts are
        # shown with: the claim is cut from it too, so that the block, which never shows a message a
        # replaced claim was cut from (FactStore.standing_passages), does not bring the replaced value
        # back with a part that still stands
        conn.execute(
            "UPDATE beads.facts SET passage_id = %s WHERE id = %s",
            (passage_id(ns.session_id, whole), old.id),
        )
    for fid in written:
        conn.execute(
            "INSERT INTO beads.edges (src, relation, dst, session_id) VALUES (%s, 'derived_from', %s, %s)"
            " ON CONFLICT DO NOTHING",
            (fid, old.id, old.session_id),
        )
    return list(written.values())


def _moved(new_heads: dict[uuid.UUID, uuid.UUID], retired: Sequence[uuid.UUID], head: uuid.UUID) -> None:
    """Record that the chains of `retired` now end at `head`, as supersede's UPDATE of head_id left
    them: what already ended at one of `retired` (an earlier replacement of this capture, itself
    replaced since) ends at `head` too."""
    gone = set(retired)
    for fid, current in new_heads.items():
        if current in gone:
            new_heads[fid] = head
    new_heads.update(dict.fromkeys(retired, head))


def accept(
    old: str, new: str, similarity: float, min_similarity: float, short_similarity: float
) -> tuple[corrections.Verdict, float] | None:
    """Whether capture supersedes `old` with `new`, two claims `similarity` apart: the verdict and
    the similarity floor the guarded supersede is held to, or None. Below `min_similarity` only two
    short claims are judged, and only a change said outright counts."""
    floor = min_similarity
    if similarity < min_similarity:
        if similarity < short_similarity or not (
            corrections.says_one_thing(old) and corrections.says_one_thing(new)
        ):
            return None
        floor = short_similarity
    verdict = corrections.judge(old, new)
    if not verdict.supersedes or (floor < min_similarity and not verdict.outright):
        return None
    return verdict, floor


def rule_of(reason: str, old: str | None = None, new: str | None = None) -> str:
    """Which of capture's rules wrote an automatic edge, from the reason it recorded, and with the
    messages the two claims were said in (`old`, `new`: whole, not the claims cut from them) whether
    both were short (SHORT_MESSAGE_WORDS): what precision is measured per
    (results/supersession/edge-audit/), and what decides whether a rule may write its edges or only
    propose them. The same cue reads differently in a one-line message and in a paragraph."""
    rule = _rule(reason)
    if old is None or new is None or rule == "echo of a replaced claim":
        return rule
    short = corrections.short_message(old) and corrections.short_message(new)
    return f"{rule}, {'short' if short else 'long'} messages"


def _rule(reason: str) -> str:
    if reason.startswith("state ended"):
        return "state ended"
    if reason.startswith("replaced:"):
        return "named what it replaced"
    if reason.startswith("same statement"):
        return "same statement, another value"
    if reason.startswith(("restated ", "restates ")):
        return "echo of a replaced claim"
    intent = reason.rsplit("(", 1)[-1].rstrip(")")
    if intent == "old value named":
        return "old value named"
    if intent == "restated":
        return "same words, another value"
    if intent.startswith("cue: "):
        return "strong cue" if corrections.is_strong_cue(intent.removeprefix("cue: ")) else "weak cue"
    return "other"


def proposals(conn: psycopg.Connection[DictRow], session_id: str) -> list[dict[str, Any]]:
    """The replacements capture proposed in this session and no one has settled, newest first."""
    return conn.execute(
        """
        SELECT e.src, e.dst, e.reason, e.created_at, n.body AS new_body, o.body AS old_body
          FROM beads.edges e
          JOIN beads.facts n ON n.id = e.src
          JOIN beads.facts o ON o.id = e.dst
         WHERE e.session_id = %s AND e.relation = 'may_supersede' AND e.settled IS NULL
         ORDER BY e.created_at DESC, e.src
        """,
        (session_id,),
    ).fetchall()


def automatic_edges(conn: psycopg.Connection[DictRow], session_id: str) -> list[dict[str, Any]]:
    """The session's automatic supersedes edges, newest first, undone ones included (as history)."""
    return conn.execute(
        """
        SELECT e.src, e.dst, e.reason, e.created_at, e.undone_at, n.body AS new_body, o.body AS old_body
          FROM beads.edges e
          JOIN beads.facts n ON n.id = e.src
          JOIN beads.facts o ON o.id = e.dst
         WHERE e.session_id = %s AND e.relation = 'supersedes' AND e.automatic
         ORDER BY e.created_at DESC, e.src
        """,
        (session_id,),
    ).fetchall()
