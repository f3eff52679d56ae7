"""Measure automatic supersession on the write path with labeled message pairs, and count what it
does to a whole conversation.

Each pair gets its own memory session: the old message(s) are captured (`FactStore.capture_message`,
passive capture of a user message), then the new one(s) a day later. The pair is predicted
`supersede` when some fact of the old messages ends up superseded with its chain's head a fact of
the new messages; otherwise `keep_both`. Nothing else is read: the figures are the store's
behaviour, whatever rule (or none) it runs on capture.

For LoCoMo (and with `--beam-chats` BEAM's chats), whole conversations are captured as the evaluation
ingests them (LoCoMo's two speakers are both user turns) and every supersedes edge capture wrote is
counted; a seeded sample of them is written out with its texts for a hand check (that file is never
committed: the datasets' licences forbid copying their text), and the verdicts, kept by id in
`<dataset>-verdicts.jsonl`, are counted in the summary. Pairs say how the rules do on what they were
written for; whole conversations say how often they fire where nobody wrote them a test.

Files written under the output folder: `pair-rows.jsonl` (one row per pair), `beam-unresolved.json`,
`locomo.json` / `beam.json` and `summary.md`, which hold ids only for BEAM and LoCoMo (a rule's reason string can
quote the text it compared, so only its leading words, up to the first quote or value, are kept
there), and `private/` (BEAM links and the LoCoMo sample with their texts and full reasons: for
reading, never committed).
"""

from __future__ import annotations

import inspect
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.eval.supersession_pairs import KEEP_BOTH, OWN_SETS, SUPERSEDE, Pair, read_jsonl, write_jsonl
from memory.model import Fact, Kind, Source, Status

if TYPE_CHECKING:
    from bench.eval.conversation import Dataset
    from memory.embedders.base import Embedder
    from memory.graph.store import FactStore

ROWS_FILE = "pair-rows.jsonl"  # not rows.jsonl: results/.gitignore keeps those local
UNRESOLVED_FILE = "beam-unresolved.json"
PRIVATE_DIR = "private"  # data text: .gitignore'd, never committed
BEAM_TEXTS = "beam-links.md"
# per dataset counted whole: <name>.json, private/<name>-sample-texts.md and the hand check by id,
# <name>-verdicts.jsonl ({key, verdict: right|wrong, note})
WHOLE_DATASETS = ("locomo", "beam")


def whole_file(name: str) -> str:
    return f"{name}.json"


def verdicts_file(name: str) -> str:
    return f"{name}-verdicts.jsonl"


def sample_texts_file(name: str) -> str:
    return f"{name}-sample-texts.md"


SUMMARY_FILE = "summary.md"
VERDICTS = ("right", "wrong")

# every pair is told on the same day, the new message a day after the old one
PAIR_TIME = datetime(2024, 1, 8, 9, 0, tzinfo=UTC)
NEW_AFTER = timedelta(days=1)
SOURCES = (*OWN_SETS, "beam-tune", "beam-holdout")


def store_supports_auto_supersede() -> bool:
    from memory.graph.store import FactStore

    return "auto_supersede" in inspect.signature(FactStore.__init__).parameters


def store_kwargs(auto_supersede: bool) -> dict[str, Any]:
    """FactStore's keyword for automatic supersession, when this version of the store has one."""
    return {"auto_supersede": auto_supersede} if store_supports_auto_supersede() else {}


@dataclass
class SupersessionConfig:
    out_dir: Path
    pairs: list[Pair]
    beam_unresolved: list[dict[str, Any]] = field(default_factory=list)
    beam_dir: str | None = None  # the data's label, for the summary
    whole: list[Dataset] = field(default_factory=list)  # counted whole: LoCoMo, BEAM's chats
    embedder: str = "minilm"
    database_url: str | None = None
    exact_database: bool = False
    auto_supersede: bool = True
    sample_size: int = 50
    seed: int = 7


# -- reading the store back ------------------------------------------------------------------------------


def supersedes_edges(store: FactStore, session_id: str) -> dict[Any, dict[str, Any]]:
    """The session's supersedes edges keyed by the replaced fact, every column the schema has
    (a reason or an automatic flag where the store records them)."""
    with store.pool.connection() as conn:
        rows = conn.execute(
            "SELECT * FROM beads.edges WHERE session_id = %s AND relation = 'supersedes'", (session_id,)
        ).fetchall()
    return {r["dst"]: dict(r) for r in rows}


def reason_kind(reason: object) -> str | None:
    """A reason's leading words, before anything it may quote from the text ("same slot (alarm) ..." ->
    "same slot"): what rows of pairs whose text must not be copied keep."""
    if reason is None:
        return None
    return re.split(r"""[(:"'\d]""", str(reason), maxsplit=1)[0].strip() or "(quoted)"


def redacted(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with each link's reason cut to its kind (for pairs whose texts stay out of the rows)."""
    links = [{**link, "reason": reason_kind(link.get("reason"))} for link in row["links"]]
    return {**row, "links": links}


def in_code(message: str, fact: Fact) -> bool:
    """Whether the fact lies inside a fenced code block of its message (a line of code, not a claim)."""
    return fact.span is not None and message.count("```", 0, fact.span[0]) % 2 == 1


def _ref(fact: Fact, texts_public: bool, message: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"message": fact.message_id, "span": list(fact.span) if fact.span else None}
    if message is not None:
        ref["in_code"] = in_code(message, fact)
    if texts_public:
        ref["text"] = fact.body
    return ref


def _covers(fact: Fact, message: str, expected: str) -> bool:
    """Whether the fact's span overlaps where `expected` sits in its message."""
    start = message.find(expected)
    if start < 0 or fact.span is None:
        return expected in fact.body or fact.body in expected
    return fact.span[0] < start + len(expected) and start < fact.span[1]


def _capture(store: FactStore, pair: Pair) -> tuple[list[Fact], list[Fact]]:
    session = f"supersession:{pair.id}"
    store.forget(session)
    root = store.root(session)
    captured: tuple[list[Fact], list[Fact]] = ([], [])
    for side, (ids, texts, at) in enumerate(
        ((pair.old_ids, pair.old, PAIR_TIME), (pair.new_ids, pair.new, PAIR_TIME + NEW_AFTER))
    ):
        for n, (message_id, text) in enumerate(zip(ids, texts, strict=True)):
            result = store.capture_message(
                root,
                text,
                source=Source.PASSIVE_CAPTURE,
                message_id=message_id,
                thread_id=pair.id,
                valid_from=at + timedelta(seconds=n),
            )
            captured[side].extend(result.facts)
    return captured


def measure_pair(store: FactStore, pair: Pair) -> dict[str, Any]:
    """Capture the pair in a fresh session and read back what superseded what: one result row."""
    old, new = _capture(store, pair)
    session = f"supersession:{pair.id}"
    now = {f.id: f for f in store.audit.session_facts(session)}
    edges = supersedes_edges(store, session)
    new_ids = {f.id for f in new}
    texts = dict(zip((*pair.old_ids, *pair.new_ids), (*pair.old, *pair.new), strict=True))
    links = []
    for fact in (now[f.id] for f in old):
        if fact.status is not Status.SUPERSEDED or fact.head_id not in new_ids:
            continue
        edge = edges.get(fact.id, {})
        # the direct successor when it is one of the new facts, else the head of the chain
        src = edge.get("src")
        successor = now.get(src) if src is not None and src in new_ids else now[fact.head_id]
        assert successor is not None
        links.append((fact, successor, edge))
    expected_linked = None
    if pair.expected_old or pair.expected_new:
        expected_linked = any(
            (not pair.expected_old or _covers(o, texts[o.message_id or ""], pair.expected_old))
            and (not pair.expected_new or _covers(n, texts[n.message_id or ""], pair.expected_new))
            for o, n, _ in links
        )
    predicted = SUPERSEDE if links else KEEP_BOTH
    return {
        "id": pair.id,
        "source": pair.source,
        "category": pair.category,
        "label": pair.label,
        "predicted": predicted,
        "correct": predicted == pair.label,
        "old_ids": list(pair.old_ids),
        "new_ids": list(pair.new_ids),
        "facts_old": len(old),
        "facts_new": len(new),
        # only user claims take part in supersession: a value said inside a question is a directive
        "user_claims_old": sum(f.kind is Kind.USER_INPUT for f in old),
        "user_claims_new": sum(f.kind is Kind.USER_INPUT for f in new),
        "links": [
            {
                "old": _ref(o, pair.texts_public, texts[o.message_id or ""]),
                "new": _ref(n, pair.texts_public, texts[n.message_id or ""]),
                "reason": edge.get("reason"),
                "automatic": edge.get("automatic"),
            }
            for o, n, edge in links
        ],
        "expected_linked": expected_linked,
        "check": pair.check,
    }


# -- LoCoMo: what capture supersedes in whole conversations ----------------------------------------------


def whole_supersessions(store: FactStore, dataset: Dataset) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Capture every conversation of `dataset` into its own session; every supersedes edge written."""
    from bench.eval.ingest import capture_conversation

    found: list[dict[str, Any]] = []
    per_conversation: dict[str, dict[str, int]] = {}
    for conversation in dataset.conversations:
        store.forget(conversation.id)
        written = capture_conversation(store, store.root(conversation.id), conversation)
        facts = {f.id: f for f in store.audit.session_facts(conversation.id)}
        speakers = {t.id: t.speaker for t in conversation.turns}
        edges = supersedes_edges(store, conversation.id)
        for edge in edges.values():
            old, new = facts[edge["dst"]], facts[edge["src"]]
            found.append(
                {
                    "key": f"{conversation.id}:{old.message_id}@{_start(old)}>{new.message_id}@{_start(new)}",
                    "conversation_id": conversation.id,
                    "old": _ref(old, False),
                    "new": _ref(new, False),
                    "same_speaker": speakers.get(old.message_id or "") == speakers.get(new.message_id or ""),
                    "reason": edge.get("reason"),
                    "automatic": edge.get("automatic"),
                    "undone": edge.get("undone_at") is not None,
                }
            )
        per_conversation[conversation.id] = {
            "turns": len(conversation.turns),
            "facts_written": written,
            "supersessions": len(edges),
        }
    found.sort(key=lambda item: item["key"])
    return found, per_conversation


def _start(fact: Fact) -> int:
    return fact.span[0] if fact.span else 0


def draw_sample(items: Sequence[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """A seeded random sample of `size` items (all of them when there are fewer), in key order."""
    chosen = random.Random(seed).sample(list(items), min(size, len(items)))
    return sorted(chosen, key=lambda item: item["key"])


def write_beam_texts(path: Path, pairs: Sequence[Pair], rows: Sequence[dict[str, Any]]) -> Path:
    """The claims each BEAM pair linked, with the full reasons, and the messages of every miss
    (never committed)."""
    by_id = {p.id: p for p in pairs}
    lines = ["# BEAM pairs: what was linked, and what was missed (BEAM text: do not commit)", ""]
    for row in rows:
        pair = by_id[row["id"]]
        if pair.texts_public or (row["correct"] and not row["links"]):
            continue
        texts = dict(zip((*pair.old_ids, *pair.new_ids), (*pair.old, *pair.new), strict=True))
        lines.append(
            f"## {row['id']}: label {row['label']}, predicted {row['predicted']} (check {row['check']})"
        )
        for link in row["links"]:
            old, new = (texts[link[s]["message"]][slice(*link[s]["span"])] for s in ("old", "new"))
            lines += [f"- old: {old}", f"  new: {new}", f"  reason: {link['reason']}"]
        if not row["links"]:
            for side, ids in (("old", pair.old_ids), ("new", pair.new_ids)):
                lines += [f"- {side} {i}: {texts[i]}" for i in ids]
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_sample_texts(path: Path, dataset: Dataset, sample: Sequence[dict[str, Any]]) -> Path:
    """The sampled pairs with their texts, to read for the hand check (never committed)."""
    turns = {(c.id, t.id): t for c in dataset.conversations for t in c.turns}
    lines = [
        f"# {dataset.name} automatic supersessions: sample for the hand check (data text: do not commit)",
        "",
        f"Judge each as right (the new claim replaces the old one) or wrong; record verdicts by key in "
        f"{verdicts_file(dataset.name)}.",
        "",
    ]
    for n, item in enumerate(sample, 1):
        conv = item["conversation_id"]
        lines.append(f"## {n}. {item['key']}")
        lines.append(f"reason: {item['reason']!r}  same speaker: {item['same_speaker']}")
        for side in ("old", "new"):
            turn = turns.get((conv, item[side]["message"]))
            span = item[side]["span"]
            if turn is None:
                lines.append(f"- {side}: (turn {item[side]['message']} not found)")
                continue
            claim = turn.text[span[0] : span[1]] if span else turn.text
            lines.append(f"- {side} [{turn.id}, {turn.speaker}] claim: {claim}")
            lines.append(f"  whole turn: {turn.text}")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- running ---------------------------------------------------------------------------------------------


@contextmanager
def open_store(config: SupersessionConfig, embedder: Embedder) -> Iterator[tuple[FactStore, str]]:
    from bench.eval.ingest import database_name, ensure_database
    from memory.graph.store import FactStore
    from memory.postgres.connection import open_pool
    from memory.postgres.embedded_postgres import resolve_database_url

    server = config.database_url or resolve_database_url()
    if config.exact_database:
        url, name = server, "(as given)"
    else:
        name = database_name("supersession", "pairs", embedder.name)
        url = ensure_database(server, name)
    with open_pool(url, min_size=1, max_size=4) as pool:
        store = FactStore(pool, embedder, **store_kwargs(config.auto_supersede))
        store.setup()
        yield store, name


def settings_of(config: SupersessionConfig) -> dict[str, Any]:
    import importlib.util

    return {
        "embedder": config.embedder,
        "auto_supersede": config.auto_supersede if store_supports_auto_supersede() else None,
        "store_has_auto_supersede": store_supports_auto_supersede(),
        "corrections_module": importlib.util.find_spec("memory.rules.corrections") is not None,
        "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def run(config: SupersessionConfig) -> Path:
    """Measure every pair (and LoCoMo when given); write the rows and the summary; the summary's path."""
    from memory.embedders.select import embedder_from_name

    out = config.out_dir
    out.mkdir(parents=True, exist_ok=True)
    embedder = embedder_from_name(config.embedder)
    settings = settings_of(config)
    with open_store(config, embedder) as (store, database):
        rows = [measure_pair(store, pair) for pair in config.pairs]
        by_id = {p.id: p for p in config.pairs}
        write_jsonl(out / ROWS_FILE, (r if by_id[r["id"]].texts_public else redacted(r) for r in rows))
        if any(not p.texts_public for p in config.pairs):
            write_beam_texts(out / PRIVATE_DIR / BEAM_TEXTS, config.pairs, rows)
        info = {
            "settings": {**settings, "database": database, "beam": config.beam_dir},
            "unresolved": config.beam_unresolved,
        }
        (out / UNRESOLVED_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        for dataset in config.whole:
            found, per_conversation = whole_supersessions(store, dataset)
            sample = draw_sample(found, config.sample_size, config.seed)
            write_sample_texts(out / PRIVATE_DIR / sample_texts_file(dataset.name), dataset, sample)
            counted = {
                "settings": {**settings, "database": database, "source": _label(dataset.source)},
                "conversations": per_conversation,
                "supersessions": len(found),
                "undone": sum(item["undone"] for item in found),
                "same_speaker": sum(item["same_speaker"] for item in found),
                "seed": config.seed,
                "sample_size": config.sample_size,
                "sample": [{**item, "reason": reason_kind(item["reason"])} for item in sample],
            }
            (out / whole_file(dataset.name)).write_text(
                json.dumps(counted, indent=2) + "\n", encoding="utf-8"
            )
    return write_summary(out)


def _label(source: str) -> str:
    path = Path(source)
    return f"{path.parent.name}/{path.name}"


# -- scoring and the summary -----------------------------------------------------------------------------


def figures(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts with supersede as the positive class: precision, recall, and the share of keep_both
    pairs left alone (what the look-alike figure is)."""
    tp = sum(r["label"] == SUPERSEDE and r["predicted"] == SUPERSEDE for r in rows)
    fp = sum(r["label"] == KEEP_BOTH and r["predicted"] == SUPERSEDE for r in rows)
    fn = sum(r["label"] == SUPERSEDE and r["predicted"] == KEEP_BOTH for r in rows)
    tn = sum(r["label"] == KEEP_BOTH and r["predicted"] == KEEP_BOTH for r in rows)
    return {
        "pairs": len(rows),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "kept": tn / (tn + fp) if tn + fp else None,
    }


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _ratio(hit: int, total: int) -> str:
    return f"{hit}/{total}" if total else "0/0"


def _groups(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    for source in SOURCES:
        chosen = [r for r in rows if r["source"] == source]
        if chosen:
            groups.append((source, chosen))
    beam = [r for r in rows if r["source"].startswith("beam-")]
    if beam:
        groups.append(("beam (all)", beam))
        checked = [r for r in beam if r["label"] == KEEP_BOTH or r.get("check") == "ok"]
        if len(checked) != len(beam):
            groups.append(("beam, updates whose citations hold both values", checked))
    return groups


def summary_markdown(
    rows: Sequence[dict[str, Any]],
    unresolved: dict[str, Any] | None,
    whole: dict[str, tuple[dict[str, Any] | None, Sequence[dict[str, Any]]]],
) -> str:
    """The summary; `whole` holds, per dataset counted whole, its counts (None: not run) and verdicts."""
    lines = ["# Automatic supersession: labeled pairs", ""]
    settings = (unresolved or {}).get("settings", {})
    if settings:
        state = {True: "on", False: "off", None: "absent (this store has no auto_supersede flag)"}
        lines += [
            f"Embedder `{settings.get('embedder')}`; automatic supersession "
            f"{state[settings.get('auto_supersede')]}; rule module memory.rules.corrections "
            f"{'present' if settings.get('corrections_module') else 'absent'}; run {settings.get('run_at')}.",
            "",
        ]
    lines += [
        "Each pair is captured in a fresh session: old message(s), then new ones a day later. Predicted",
        "`supersede` when a fact of the old message ends superseded with a fact of the new one as its head.",
        "Corrections are the pairs labeled `supersede` (recall), look-alikes those labeled `keep_both`",
        "(kept apart = left alone; 1 minus the false supersession rate); precision is over all the pairs",
        "the store superseded. A miss marked 'no user claim in new' had every claim of that side",
        "captured as a directive (a question or a request), which capture does not compare.",
        "",
        "## Headline",
        "",
        "| pairs | corrections found (recall) | look-alikes kept apart | precision | wrong claims linked |",
        "|---|---|---|---|---|",
    ]
    for name, group in _groups(rows):
        f = figures(group)
        with_expected = [
            r for r in group if r["predicted"] == SUPERSEDE and r.get("expected_linked") is not None
        ]
        misplaced = sum(not r["expected_linked"] for r in with_expected)
        lines.append(
            f"| {name} ({f['pairs']}) | {_ratio(f['tp'], f['tp'] + f['fn'])} = {_f(f['recall'])} "
            f"| {_ratio(f['tn'], f['tn'] + f['fp'])} = {_f(f['kept'])} | {_f(f['precision'])} "
            f"| {_ratio(misplaced, len(with_expected)) if with_expected else '-'} |"
        )
    lines += [
        "",
        "## Per category",
        "",
        "| source | category | pairs | label | superseded | right |",
        "|---|---|---|---|---|---|",
    ]
    by_category: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_category[(r["source"], r["category"])].append(r)
    rank = {source: n for n, source in enumerate(SOURCES)}
    for (source, category), group in sorted(
        by_category.items(), key=lambda kv: (rank.get(kv[0][0], 9), kv[0])
    ):
        labels = Counter(r["label"] for r in group)
        lines.append(
            f"| {source} | {category} | {len(group)} | {', '.join(sorted(labels))} "
            f"| {sum(r['predicted'] == SUPERSEDE for r in group)} | {sum(r['correct'] for r in group)} |"
        )
    for title, label, predicted in (
        ("False positives (keep_both pairs the store superseded)", KEEP_BOTH, SUPERSEDE),
        ("False negatives (corrections the store missed)", SUPERSEDE, KEEP_BOTH),
    ):
        wrong = [r for r in rows if r["label"] == label and r["predicted"] == predicted]
        lines += ["", f"## {title}: {len(wrong)}", ""]
        for r in wrong:
            reasons = (
                "; ".join(str(link["reason"]) for link in r["links"] if link.get("reason"))
                or "no reason recorded"
            )
            notes = [f"citations: {r['check']}"] if r.get("check") and r["check"] != "ok" else []
            notes += [
                f"no user claim in {side}" for side in ("old", "new") if r.get(f"user_claims_{side}") == 0
            ]
            extra = f": {reasons}" if predicted == SUPERSEDE else ""
            lines.append(f"- `{r['id']}` ({r['category']}){''.join(f' ({n})' for n in notes)}{extra}")
    misplaced_rows = [r for r in rows if r["predicted"] == SUPERSEDE and r.get("expected_linked") is False]
    if misplaced_rows:
        lines += ["", f"## Superseded, but not the claims named: {len(misplaced_rows)}", ""]
        lines += [f"- `{r['id']}` ({r['category']})" for r in misplaced_rows]
    code_rows = [r for r in rows if r["links"] and all(_code_link(link) for link in r["links"])]
    if code_rows:
        lines += ["", f"## Superseded only through lines of code (fenced blocks): {len(code_rows)}", ""]
        lines += [f"- `{r['id']}` ({r['category']}, label {r['label']})" for r in code_rows]
    lines += _unresolved_section(unresolved)
    for name, (counted, verdicts) in whole.items():
        lines += _whole_section(name, counted, verdicts)
    return "\n".join(lines) + "\n"


def _code_link(link: dict[str, Any]) -> bool:
    return bool(link["old"].get("in_code") or link["new"].get("in_code"))


def _unresolved_section(unresolved: dict[str, Any] | None) -> list[str]:
    items = (unresolved or {}).get("unresolved") or []
    if not items and not (unresolved or {}).get("settings", {}).get("beam"):
        return ["", "## BEAM", "", "Not run (no --beam folder given)."]
    lines = ["", f"## BEAM questions that make no pair: {len(items)}", ""]
    counts = Counter((i["split"], i["question_type"]) for i in items)
    for (split, qtype), n in sorted(counts.items()):
        lines.append(f"- {split}, {qtype}: {n}")
    lines += [f"- `{i['id']}`: {i['reason']}" for i in items]
    return lines


_TITLES = {"locomo": ("LoCoMo", "--locomo FILE"), "beam": ("BEAM", "--beam DIR --beam-chats")}


def _whole_section(name: str, locomo: dict[str, Any] | None, verdicts: Sequence[dict[str, Any]]) -> list[str]:
    title, flag = _TITLES.get(name, (name, name))
    if locomo is None:
        return ["", f"## {title}", "", f"Not run (no {flag} given)."]
    settings = locomo.get("settings", {})
    turns = sum(c["turns"] for c in locomo["conversations"].values())
    facts = sum(c["facts_written"] for c in locomo["conversations"].values())
    sample = locomo.get("sample", [])
    by_key = {v["key"]: v for v in verdicts}
    judged = [by_key[s["key"]] for s in sample if s["key"] in by_key]
    wrong = sum(v["verdict"] == "wrong" for v in judged)
    lines = [
        "",
        f"## {title}: automatic supersessions in whole conversations",
        "",
        f"{settings.get('source')}, {len(locomo['conversations'])} conversations, {turns:,} turns, {facts:,} facts "
        f"written, automatic supersession {settings.get('auto_supersede')}, run {settings.get('run_at')}.",
        "",
        f"- supersessions: {locomo['supersessions']} (undone later: {locomo['undone']}; between turns of one "
        f"speaker: {locomo['same_speaker']})",
        "- per conversation: "
        + ", ".join(f"{cid} {c['supersessions']}" for cid, c in locomo["conversations"].items()),
        f"- hand-checked sample (seed {locomo['seed']}): {len(sample)} drawn, {len(judged)} judged, "
        f"{wrong} wrong, {len(judged) - wrong} right, {len(sample) - len(judged)} not judged yet",
    ]
    if wrong:
        lines += ["", "Wrong ones:", ""]
        lines += [f"- `{v['key']}`: {v.get('note', '')}" for v in judged if v["verdict"] == "wrong"]
    return lines


def write_summary(out: Path) -> Path:
    """summary.md from the files of `out` (rows, unresolved BEAM questions, LoCoMo, verdicts)."""
    rows = read_jsonl(out / ROWS_FILE) if (out / ROWS_FILE).exists() else []
    unresolved = json.loads((out / UNRESOLVED_FILE).read_text()) if (out / UNRESOLVED_FILE).exists() else None
    whole: dict[str, tuple[dict[str, Any] | None, Sequence[dict[str, Any]]]] = {}
    for name in WHOLE_DATASETS:
        counted = (
            json.loads((out / whole_file(name)).read_text()) if (out / whole_file(name)).exists() else None
        )
        verdicts = read_jsonl(out / verdicts_file(name)) if (out / verdicts_file(name)).exists() else []
        bad = [v for v in verdicts if v.get("verdict") not in VERDICTS]
        if bad:
            raise ValueError(f"{verdicts_file(name)}: verdicts must be one of {VERDICTS}: {bad[:3]}")
        whole[name] = (counted, verdicts)
    path = out / SUMMARY_FILE
    path.write_text(summary_markdown(rows, unresolved, whole), encoding="utf-8")
    return path
