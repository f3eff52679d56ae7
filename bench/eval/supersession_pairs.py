"""Labeled pairs of user messages for measuring automatic supersession: does the later message
replace a claim of the earlier one (`supersede`), or must both stay current (`keep_both`)?

Two sources. Our own pairs (`data/supersession_pairs.jsonl`) are written for this set: corrections of
every kind of value, and look-alikes that share words with the earlier claim but are about another
thing (another qualifier, another person, another of two items, a past state told as history, a
question or a hypothesis, an addition). Their texts are in the file.

BEAM pairs (`data/beam_supersession_pairs.jsonl`) come from BEAM's probing questions: a
`knowledge_update` question cites the message holding the original value and the one holding the
update (label `supersede`); a `contradiction_resolution` question cites two statements that disagree,
which memory should surface rather than silently resolve (label `keep_both`). BEAM's licence does not
allow copying its text, so the file holds ids only (chat, question type and index, message ids) and
`resolve_beam_pairs` reads the messages from a BEAM folder at run time. `build_beam_pair_specs`
derives the file from the data; questions whose citations cannot make a pair are kept in it with the
reason, so the count of what could not be resolved is part of the record.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.eval.conversation import LoadIssues, Turn
from bench.eval.loaders import flatten_beam_ids, load_beam
from memory.errors import BeadsMemoryError

DATA_DIR = Path(__file__).parent / "data"
OWN_PAIRS = DATA_DIR / "supersession_pairs.jsonl"
# written apart from the rules, after they were tuned on OWN_PAIRS: the honest figure for our phrasing
BLIND_PAIRS = DATA_DIR / "supersession_pairs_blind.jsonl"
# Later blind sets, each written apart from the rules by a writer who read neither them nor the other
# sets. Each was held out until the rules were tuned on the ones before it: the second to fourth then
# became tuning sets too (results/supersession/README.md says when). The fifth and sixth were read after
# their first measure (one false positive mended); the seventh and eighth are held out; the ninth was
# read after its first measure.
BLIND_SETS = {
    "ours-blind-2": DATA_DIR / "supersession_pairs_blind2.jsonl",
    "ours-blind-3": DATA_DIR / "supersession_pairs_blind3.jsonl",
    "ours-blind-4": DATA_DIR / "supersession_pairs_blind4.jsonl",
    "ours-blind-5": DATA_DIR / "supersession_pairs_blind5.jsonl",
    "ours-blind-6": DATA_DIR / "supersession_pairs_blind6.jsonl",
    "ours-blind-7": DATA_DIR / "supersession_pairs_blind7.jsonl",
    "ours-blind-8": DATA_DIR / "supersession_pairs_blind8.jsonl",
    # held out for a looser reading of a change, and read once it was measured (results/supersession/blind9)
    "ours-blind-9": DATA_DIR / "supersession_pairs_blind9.jsonl",
}
#: every set of our own pairs, by the source its rows carry
OWN_SETS: dict[str, Path] = {"ours": OWN_PAIRS, "ours-blind": BLIND_PAIRS, **BLIND_SETS}
BEAM_PAIRS = DATA_DIR / "beam_supersession_pairs.jsonl"

SUPERSEDE, KEEP_BOTH = "supersede", "keep_both"
LABELS = (SUPERSEDE, KEEP_BOTH)
# the families a category belongs to: the part before "/" ("correction/money" -> "correction")
OWN_FAMILIES = ("correction", "lookalike", "addition")
BEAM_LABELS = {"knowledge_update": SUPERSEDE, "contradiction_resolution": KEEP_BOTH}
# chats 1-6 are what rules may be tuned on; 7 and later are held out
TUNE_CHATS = frozenset(range(1, 7))

OWN_FIELDS = frozenset({"id", "category", "old", "new", "label", "expected_old", "expected_new", "note"})
BEAM_FIELDS = frozenset(
    {
        "id",
        "chat",
        "question_type",
        "question_index",
        "split",
        "label",
        "old_ids",
        "new_ids",
        "unresolved",
        "check",
        "note",
    }
)
# what a hand check of a resolved BEAM pair found: the citations carry the claims, or they do not
BEAM_CHECKS = ("ok", "old_lacks_claim", "new_lacks_value", "unrelated")


@dataclass(frozen=True, slots=True)
class Pair:
    """Two turns of one user: `old` said first, then `new` (each one or more messages)."""

    id: str
    source: str  # "ours", "ours-blind" (and its later sets, BLIND_SETS), "beam-tune" or "beam-holdout"
    category: str
    label: str
    old: tuple[str, ...]
    new: tuple[str, ...]
    # message ids: BEAM's own, or "old"/"new" with an index for our pairs
    old_ids: tuple[str, ...]
    new_ids: tuple[str, ...]
    # substrings of old / new naming the claims a supersession should link (several-sentence messages)
    expected_old: str | None = None
    expected_new: str | None = None
    # whether the texts may be written into result rows (ours) or only ids (BEAM)
    texts_public: bool = True
    check: str | None = None  # BEAM: what the hand check of the citations found

    @property
    def family(self) -> str:
        return self.category.split("/", 1)[0]


class PairFileError(BeadsMemoryError, ValueError):
    """A pair file is malformed; the message names the line and what is wrong with it."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise PairFileError(f"{path.name}:{n}: not JSON ({exc})") from None
    return rows


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# -- our pairs -------------------------------------------------------------------------------------------


def own_pair_problems(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Everything wrong with rows of our pair file (empty when it is well-formed)."""
    problems: list[str] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        where = f"row {n} ({row.get('id', '?')})"
        if extra := set(row) - OWN_FIELDS:
            problems.append(f"{where}: unknown fields {sorted(extra)}")
        for key in ("id", "category", "old", "new", "label"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                problems.append(f"{where}: {key} must be a non-empty string")
        if row.get("id") in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(str(row.get("id")))
        if row.get("label") not in LABELS:
            problems.append(f"{where}: label must be one of {LABELS}")
        family = str(row.get("category", "")).split("/", 1)[0]
        if family not in OWN_FAMILIES:
            problems.append(f"{where}: category family must be one of {OWN_FAMILIES}")
        elif (family == "correction") != (row.get("label") == SUPERSEDE):
            problems.append(f"{where}: corrections are labeled supersede, everything else keep_both")
        for key, text in (("expected_old", "old"), ("expected_new", "new")):
            if key in row and str(row[key]) not in str(row.get(text, "")):
                problems.append(f"{where}: {key} is not a substring of {text}")
        if row.get("old") == row.get("new"):
            problems.append(f"{where}: old and new are the same text")
    return problems


def load_own_pairs(path: Path = OWN_PAIRS, source: str = "ours") -> list[Pair]:
    rows = read_jsonl(path)
    if problems := own_pair_problems(rows):
        raise PairFileError(f"{path.name}: " + "; ".join(problems[:10]))
    return [
        Pair(
            id=row["id"],
            source=source,
            category=row["category"],
            label=row["label"],
            old=(row["old"],),
            new=(row["new"],),
            old_ids=("old",),
            new_ids=("new",),
            expected_old=row.get("expected_old"),
            expected_new=row.get("expected_new"),
        )
        for row in rows
    ]


# -- BEAM pairs ------------------------------------------------------------------------------------------


def beam_split(chat: str) -> str:
    return "tune" if chat.isdigit() and int(chat) in TUNE_CHATS else "holdout"


def _statement_groups(ability: str, raw: object) -> tuple[object, object] | str:
    """The two cited groups (earlier-labeled first), or why they cannot be told apart."""
    if ability == "knowledge_update":
        if not isinstance(raw, dict):
            return f"source_chat_ids is a {type(raw).__name__}, not original_info/updated_info"
        return raw.get("original_info"), raw.get("updated_info")
    if isinstance(raw, dict):
        values = list(raw.values())
        if len(values) != 2:
            return f"source_chat_ids has {len(values)} groups, not two statements"
        return values[0], values[1]
    if isinstance(raw, list | tuple):
        if len(raw) == 2:  # [a, b] or [[a...], [b...]]: one entry per statement
            return raw[0], raw[1]
        return f"source_chat_ids lists {len(raw)} entries, not two statements"
    return f"source_chat_ids is {raw!r}"


def _pair_spec(
    chat: str, ability: str, index: int, item: dict[str, Any], turns: dict[str, Turn], order: dict[str, int]
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "id": f"beam-{chat}-{ability}-{index}",
        "chat": chat,
        "question_type": ability,
        "question_index": index,
        "split": beam_split(chat),
        "label": BEAM_LABELS[ability],
        "old_ids": [],
        "new_ids": [],
        "unresolved": None,
    }
    groups = _statement_groups(ability, item.get("source_chat_ids"))
    if isinstance(groups, str):
        spec["unresolved"] = groups
        return spec
    issues = LoadIssues()
    first, second = (flatten_beam_ids(g, issues, spec["id"]) for g in groups)
    spec["old_ids"], spec["new_ids"] = list(dict.fromkeys(first)), list(dict.fromkeys(second))
    cited = spec["old_ids"] + spec["new_ids"]
    if missing := [i for i in cited if i not in turns]:
        spec["unresolved"] = f"cites messages not in the chat: {', '.join(missing)}"
    elif not_user := [i for i in cited if turns[i].role != "user"]:
        spec["unresolved"] = f"cites assistant messages: {', '.join(not_user)}"
    elif not first or not second:
        spec["unresolved"] = "one of the two statements cites no message"
    elif set(first) & set(second):
        spec["unresolved"] = "one message is cited as both statements"
    if spec["unresolved"]:
        return spec
    old, new = sorted(spec["old_ids"], key=order.__getitem__), sorted(spec["new_ids"], key=order.__getitem__)
    if ability == "contradiction_resolution" and order[new[0]] < order[old[0]]:
        old, new = new, old  # a contradiction has no direction: the statement said first is the old one
    if order[old[-1]] > order[new[0]]:
        spec["unresolved"] = "the two statements' messages interleave"
    spec["old_ids"], spec["new_ids"] = old, new
    return spec


def build_beam_pair_specs(beam_dir: Path, previous: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One spec per knowledge_update and contradiction_resolution question of every chat under
    `beam_dir`, ids only; hand-check fields (`check`, `note`) of `previous` specs are kept by id."""
    kept = {s["id"]: s for s in previous}
    dataset = load_beam(beam_dir)
    specs: list[dict[str, Any]] = []
    for conversation in dataset.conversations:
        chat = conversation.id.removeprefix("beam-")
        folder = beam_dir if (beam_dir / "chat.json").exists() else beam_dir / chat.replace("-", "/")
        probing = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
        turns = {t.id: t for t in conversation.turns}
        order = {t.id: n for n, t in enumerate(conversation.turns)}
        for ability in BEAM_LABELS:
            items = probing.get(ability)
            for index, item in enumerate(items if isinstance(items, list) else []):
                spec = _pair_spec(chat, ability, index, item, turns, order)
                for key in ("check", "note"):
                    if key in kept.get(spec["id"], {}):
                        spec[key] = kept[spec["id"]][key]
                specs.append(spec)
    return specs


def beam_spec_problems(specs: Sequence[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for n, spec in enumerate(specs, 1):
        where = f"row {n} ({spec.get('id', '?')})"
        if extra := set(spec) - BEAM_FIELDS:
            problems.append(f"{where}: unknown fields {sorted(extra)} (BEAM pairs hold ids only)")
        if spec.get("id") in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(str(spec.get("id")))
        if spec.get("question_type") not in BEAM_LABELS:
            problems.append(f"{where}: question_type must be one of {sorted(BEAM_LABELS)}")
        elif spec.get("label") != BEAM_LABELS[spec["question_type"]]:
            problems.append(
                f"{where}: a {spec['question_type']} pair is labeled {BEAM_LABELS[spec['question_type']]}"
            )
        if spec.get("split") != beam_split(str(spec.get("chat"))):
            problems.append(f"{where}: split must be {beam_split(str(spec.get('chat')))}")
        if spec.get("check") is not None and spec["check"] not in BEAM_CHECKS:
            problems.append(f"{where}: check must be one of {BEAM_CHECKS}")
        if not spec.get("unresolved"):
            old, new = spec.get("old_ids") or [], spec.get("new_ids") or []
            if not old or not new or set(old) & set(new):
                problems.append(f"{where}: a resolved pair needs disjoint, non-empty old_ids and new_ids")
    return problems


def load_beam_pair_specs(path: Path = BEAM_PAIRS) -> list[dict[str, Any]]:
    specs = read_jsonl(path)
    if problems := beam_spec_problems(specs):
        raise PairFileError(f"{path.name}: " + "; ".join(problems[:10]))
    return specs


@dataclass
class BeamResolution:
    pairs: list[Pair]
    unresolved: list[dict[str, Any]]  # specs that make no pair: {id, split, question_type, reason}


def resolve_beam_pairs(specs: Sequence[dict[str, Any]], beam_dir: Path) -> BeamResolution:
    """Pairs with their texts read from `beam_dir` (a folder of BEAM chats, e.g. chats/100K)."""
    chats: dict[str, dict[str, Turn]] = {}
    pairs: list[Pair] = []
    unresolved: list[dict[str, Any]] = []
    for spec in specs:
        chat = str(spec["chat"])
        base = {"id": spec["id"], "split": spec["split"], "question_type": spec["question_type"]}
        if spec.get("unresolved"):
            unresolved.append({**base, "reason": spec["unresolved"]})
            continue
        if chat not in chats:
            folder = beam_dir / chat
            if not (folder / "chat.json").exists():
                chats[chat] = {}
            else:
                [conversation] = load_beam(folder).conversations
                chats[chat] = {t.id: t for t in conversation.turns}
        turns = chats[chat]
        ids = [*spec["old_ids"], *spec["new_ids"]]
        if not turns:
            unresolved.append({**base, "reason": f"chat {chat} is not in the data folder"})
            continue
        if missing := [i for i in ids if i not in turns]:
            unresolved.append({**base, "reason": f"messages {', '.join(missing)} are not in chat {chat}"})
            continue
        pairs.append(
            Pair(
                id=spec["id"],
                source=f"beam-{spec['split']}",
                category=f"beam/{spec['question_type']}",
                label=spec["label"],
                old=tuple(turns[i].text for i in spec["old_ids"]),
                new=tuple(turns[i].text for i in spec["new_ids"]),
                old_ids=tuple(spec["old_ids"]),
                new_ids=tuple(spec["new_ids"]),
                texts_public=False,
                check=spec.get("check"),
            )
        )
    return BeamResolution(pairs, unresolved)


def short_label(source: str) -> str:
    """A set's name in the benches' tables: "own", "blind", "blind-2", ..."""
    return "own" if source == "ours" else source.removeprefix("ours-")
