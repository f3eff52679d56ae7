"""Read LoCoMo, BEAM and LongMemEval files into bench.eval.conversation records, leniently.

Each benchmark cites evidence its own way and each has defects (LoCoMo's "D8:6; D9:17", BEAM's
`source_chat_ids` as a list, a nested list or a dict). Every id that had to be repaired or could not
be resolved is counted in the dataset's `LoadIssues` rather than silently dropped, so a reader can see
how much of the evidence the figures rest on.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.eval.answer_scores import stale_values_from
from bench.eval.conversation import (
    Conversation,
    Dataset,
    JudgePrompt,
    LoadIssues,
    Question,
    Role,
    Session,
    Turn,
)
from memory.doors.transcripts import (
    BEAM_INDEX_MARKER,
    locomo_session_numbers,
    parse_beam_anchor,
    parse_lme_date,
    parse_locomo_date,
)

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

# "D8:6", and the repairable variants "D:11:26", "D30:05", "d8:6"
_LOCOMO_ID = re.compile(r"D:?(\d+):(\d+)", re.I)
_TRAILING_NUMBER = re.compile(r"(?:chat[_ ]?id\s*[:=]?\s*)?(\d+)\s*$", re.I)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# -- LoCoMo --------------------------------------------------------------------------------------------


def parse_locomo_evidence(raw: object, known: set[str], issues: LoadIssues, where: str) -> tuple[str, ...]:
    """Resolve LoCoMo evidence strings to existing dia_ids, counting every repair and every loss."""
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    resolved: list[str] = []
    for entry in entries:
        text = str(entry).strip()
        pieces = [p for p in re.split(r"[;,\s]+", text) if p]
        if len(pieces) > 1:
            issues.note("evidence strings holding several ids (split)", f"{where}: {text!r}")
        if not pieces:
            issues.note("evidence unresolved: empty", f"{where}: {text!r}")
        for piece in pieces:
            match = _LOCOMO_ID.fullmatch(piece)
            if not match:
                issues.note("evidence unresolved: malformed", f"{where}: {piece!r}")
                continue
            turn_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if turn_id != piece:
                issues.note("evidence ids repaired (format)", f"{where}: {piece!r} -> {turn_id}")
            if turn_id not in known:
                issues.note("evidence unresolved: no such turn", f"{where}: {turn_id}")
                continue
            if turn_id not in resolved:
                resolved.append(turn_id)
    return tuple(resolved)


def load_locomo(path: str | Path) -> Dataset:
    """LoCoMo (snap-research/LoCoMo `locomo10.json` layout).

    Both speakers are people talking about their own lives, and the questions ask about either of them,
    so both are loaded as `user` turns: captured verbatim and split into claims like any user message.
    Routing one speaker through the assistant path would give only the other the splitter and the
    directive filter, an asymmetry the questions do not have. A shared photo is kept as its caption,
    as LoCoMo's own evaluation shows it; the model-written `observation` and `session_summary` are
    never read.
    """
    path = Path(path)
    issues = LoadIssues()
    conversations: list[Conversation] = []
    for n_sample, sample in enumerate(_read_json(path)):
        conv_id = str(sample.get("sample_id") or f"locomo-{n_sample}")
        body = sample.get("conversation") or {}
        numbers = locomo_session_numbers(body)
        sessions: list[Session] = []
        for number in numbers:
            started = parse_locomo_date(body.get(f"session_{number}_date_time"))
            if started is None:
                issues.note("session dates unparsed", f"{conv_id}: session_{number}")
            turns = []
            for k, raw in enumerate(body[f"session_{number}"]):
                text = str(raw.get("text") or "").strip()
                if raw.get("blip_caption"):
                    text = f"{text} [shares a photo: {raw['blip_caption']}]".strip()
                turn_id = str(raw.get("dia_id") or f"D{number}:{k + 1}")
                if not text:
                    issues.note("empty turns skipped", f"{conv_id}: {turn_id}")
                    continue
                # turns of a session share its date; a second per turn keeps their order in valid_from
                stamp = started + timedelta(seconds=k) if started else None
                speaker = str(raw.get("speaker") or "unknown")
                turns.append(Turn(turn_id, f"session_{number}", "user", speaker, text, stamp))
            sessions.append(Session(f"session_{number}", tuple(turns)))
        known = {t.id for s in sessions for t in s.turns}
        questions = []
        for n_q, qa in enumerate(sample.get("qa") or []):
            qid = f"{conv_id}:q{n_q}"
            category = int(qa.get("category") or 0)
            evidence = parse_locomo_evidence(qa.get("evidence"), known, issues, qid)
            unanswerable = category == 5
            if unanswerable:
                reference = (
                    "The conversation never states this; the question is adversarial and presupposes "
                    f"something that was not said ({qa.get('adversarial_answer', 'no answer')})."
                )
            else:
                reference = str(qa.get("answer", ""))
            prompt: JudgePrompt = "abstention" if unanswerable else "temporal" if category == 2 else "default"
            questions.append(
                Question(
                    id=qid,
                    conversation_id=conv_id,
                    type=LOCOMO_CATEGORIES.get(category, f"category-{category}"),
                    question=str(qa.get("question", "")),
                    reference=reference,
                    evidence_ids=evidence,
                    abstention=unanswerable,
                    judge_prompt=prompt,
                )
            )
        conversations.append(Conversation(conv_id, "locomo", tuple(sessions), tuple(questions)))
    return Dataset("locomo", str(path), conversations, issues)


# -- BEAM ----------------------------------------------------------------------------------------------

_BEAM_PROMPTS: dict[str, JudgePrompt] = {
    "abstention": "abstention",
    "knowledge_update": "knowledge-update",
    "temporal_reasoning": "temporal",
    "instruction_following": "preference",
    "preference_following": "preference",
    "summarization": "preference",  # graded against its rubric, as BEAM does, not verbatim
}


def flatten_beam_ids(raw: object, issues: LoadIssues, where: str) -> list[str]:
    """Message ids from any of BEAM's shapes: an int, a list, a nested list, a dict of lists."""
    if raw is None:
        return []
    if isinstance(raw, bool):
        issues.note("evidence unresolved: malformed", f"{where}: {raw!r}")
        return []
    if isinstance(raw, int):
        return [str(raw)]
    if isinstance(raw, float) and raw.is_integer():
        return [str(int(raw))]
    if isinstance(raw, str):
        match = _TRAILING_NUMBER.fullmatch(raw.strip())
        if not match:
            issues.note("evidence unresolved: malformed", f"{where}: {raw!r}")
            return []
        if match.group(1) != raw.strip():
            issues.note("evidence ids repaired (format)", f"{where}: {raw!r}")
        return [str(int(match.group(1)))]
    if isinstance(raw, dict):
        return [i for value in raw.values() for i in flatten_beam_ids(value, issues, where)]
    if isinstance(raw, list | tuple):
        if any(isinstance(x, list | tuple) for x in raw):
            issues.note("evidence in nested lists (flattened)", where)
        return [i for value in raw for i in flatten_beam_ids(value, issues, where)]
    issues.note("evidence unresolved: malformed", f"{where}: {raw!r}")
    return []


def _known(ids: Iterable[str], known: set[str], issues: LoadIssues, where: str) -> tuple[str, ...]:
    kept: list[str] = []
    for turn_id in ids:
        if turn_id not in known:
            issues.note("evidence unresolved: no such turn", f"{where}: {turn_id}")
        elif turn_id not in kept:
            kept.append(turn_id)
    return tuple(kept)


def _beam_reference(ability: str, item: dict[str, Any]) -> str:
    if ability == "abstention":
        return str(item.get("why_unanswerable") or item.get("ideal_response") or "")
    for key in ("answer", "ideal_answer", "ideal_summary", "ideal_response", "expected_compliance"):
        if item.get(key):
            text = str(item[key])
            break
    else:
        text = ""
    rubric = item.get("rubric")
    if _BEAM_PROMPTS.get(ability) == "preference" and isinstance(rubric, list) and rubric:
        text = "\n".join([text, *(f"- {r}" for r in rubric)]).strip()
    return text


_RUBRIC_STATE = re.compile(r"^.*?\bshould (?:state|mention|say)\s*:?\s*", re.I)


def _beam_current_values(item: dict[str, Any]) -> tuple[str, ...]:
    """A knowledge update's current value as its rubric states it ("LLM response should state: 165
    commits" -> "165 commits"), one per rubric line; the answer where there is no rubric."""
    rubric = item.get("rubric")
    lines = [str(r) for r in rubric] if isinstance(rubric, list) else []
    values = tuple(v for line in lines if (v := _RUBRIC_STATE.sub("", line).strip().rstrip(".")))
    answer = str(item.get("answer") or "").strip()
    return values or ((answer,) if answer else ())


def _load_beam_chat(folder: Path, conv_id: str, issues: LoadIssues, dataset: str = "beam") -> Conversation:
    sessions: list[Session] = []
    anchor: datetime | None = None
    ordinal = 0
    seen: set[str] = set()
    for n_batch, batch in enumerate(_read_json(folder / "chat.json")):
        session_id = f"batch-{batch.get('batch_number', n_batch + 1)}"
        anchor = parse_beam_anchor(batch.get("time_anchor")) or anchor
        turns: list[Turn] = []
        groups = batch.get("turns") or []
        for message in (m for group in groups for m in (group if isinstance(group, list) else [group])):
            anchor = parse_beam_anchor(message.get("time_anchor")) or anchor
            turn_id = str(message.get("id", f"{session_id}:{len(turns)}"))
            if turn_id in seen:
                issues.note("duplicate message ids (suffixed)", f"{conv_id}: {turn_id}")
                turn_id = f"{turn_id}#{ordinal}"
            seen.add(turn_id)
            text = BEAM_INDEX_MARKER.sub("", str(message.get("content") or "")).strip()
            role: Role = "assistant" if message.get("role") == "assistant" else "user"
            ordinal += 1
            if not text:
                issues.note("empty turns skipped", f"{conv_id}: {turn_id}")
                continue
            stamp = anchor + timedelta(seconds=ordinal) if anchor else None
            turns.append(Turn(turn_id, session_id, role, role, text, stamp))
        sessions.append(Session(session_id, tuple(turns)))
    turn_text = {t.id: t.text for s in sessions for t in s.turns}
    known = set(turn_text)
    questions: list[Question] = []
    probing = _read_json(folder / "probing_questions.json")
    for ability, items in probing.items():
        for n_item, item in enumerate(items if isinstance(items, list) else []):
            qid = f"{conv_id}:{ability}:{n_item}"
            raw_ids = item.get("source_chat_ids")
            stale: tuple[str, ...] = ()
            current: tuple[str, ...] = ()
            current_values: tuple[str, ...] = ()
            stale_values: tuple[str, ...] = ()
            if ability == "knowledge_update" and isinstance(raw_ids, dict):
                stale = _known(
                    flatten_beam_ids(raw_ids.get("original_info"), issues, qid), known, issues, qid
                )
                current = _known(
                    flatten_beam_ids(raw_ids.get("updated_info"), issues, qid), known, issues, qid
                )
                if set(stale) & set(current):
                    # one message cannot be both the replaced and the current value: no KU figure for it
                    issues.note("knowledge updates citing one message as stale and current", qid)
                    stale = tuple(i for i in stale if i not in current)
                evidence = current
                current_values = _beam_current_values(item)
                stale_values = stale_values_from(
                    current_values, (turn_text[i] for i in stale), str(item.get("answer") or "")
                )
            else:
                evidence = _known(flatten_beam_ids(raw_ids, issues, qid), known, issues, qid)
            if ability != "abstention" and not evidence:
                issues.note("questions left without evidence", qid)
            questions.append(
                Question(
                    id=qid,
                    conversation_id=conv_id,
                    type=ability,
                    question=str(item.get("question", "")),
                    reference=_beam_reference(ability, item),
                    evidence_ids=evidence,
                    stale_ids=stale,
                    current_ids=current,
                    current_values=current_values,
                    stale_values=stale_values,
                    abstention=ability == "abstention",
                    judge_prompt=_BEAM_PROMPTS.get(ability, "default"),
                )
            )
    return Conversation(conv_id, dataset, tuple(sessions), tuple(questions))


# BEAM's tiers are folders named by their length: 100K, 500K, 1M (10M upstream)
_BEAM_TIER = re.compile(r"(\d+)\s*([KM])", re.I)


def beam_tier(path: str | Path) -> str | None:
    """The tier a BEAM folder holds, from its name or its parent's ("500K" -> "500k"); None when
    neither names one (a folder of chats laid out some other way)."""
    folder = Path(path)
    for name in (folder.name, folder.parent.name):
        if match := _BEAM_TIER.fullmatch(name.strip()):
            return f"{int(match.group(1))}{match.group(2).lower()}"
    return None


def beam_dataset_name(tier: str | None) -> str:
    """`beam-<tier>` ("beam-500k"), or plain `beam` for chats of no known tier."""
    return "beam" if tier is None else f"beam-{tier}"


def load_beam_tiered(path: str | Path) -> Dataset:
    """`load_beam` with the tier read from the folder's name, so that chat 1 of 500K is `beam-500k-1`
    and never `beam-1`: the harness's BEAM loader, where tiers are read side by side."""
    return load_beam(path, tier=beam_tier(path))


def load_beam(path: str | Path, tier: str | None = None) -> Dataset:
    """BEAM chats: `path` is one chat folder (chat.json + probing_questions.json) or a tree of them.

    Conversation ids are `beam-<chat>`, or `beam-<tier>-<chat>` with a `tier` ("500k"); the dataset is
    named `beam` or `beam-<tier>` alike.
    """
    root = Path(path)
    issues = LoadIssues()
    prefix = beam_dataset_name(tier)
    folders = [root] if (root / "chat.json").exists() else sorted({p.parent for p in root.rglob("chat.json")})
    folders = [f for f in folders if (f / "probing_questions.json").exists()]

    def order(folder: Path) -> tuple[int, str]:
        return (int(folder.name), "") if folder.name.isdigit() else (1 << 30, folder.name)

    conversations = []
    for folder in sorted(folders, key=order):
        relative = folder.name if folder == root else str(folder.relative_to(root)).replace("/", "-")
        conversations.append(_load_beam_chat(folder, f"{prefix}-{relative}", issues, prefix))
    return Dataset(prefix, str(root), conversations, issues)


# -- LongMemEval ---------------------------------------------------------------------------------------

_LME_PROMPTS: dict[str, JudgePrompt] = {
    "temporal-reasoning": "temporal",
    "knowledge-update": "knowledge-update",
    "single-session-preference": "preference",
}


def load_longmemeval(path: str | Path) -> Dataset:
    """LongMemEval (oracle, S or M, cleaned JSON): each question brings its own haystack.

    One conversation per question. Evidence is every `has_answer` turn inside the answer sessions,
    of either role: both roles are captured here, so an assistant-side answer is retrievable too.
    """
    path = Path(path)
    issues = LoadIssues()
    conversations: list[Conversation] = []
    for item in _read_json(path):
        qid = str(item.get("question_id", f"q{len(conversations)}"))
        ids = item.get("haystack_session_ids") or []
        dates = item.get("haystack_dates") or []
        raw_sessions = item.get("haystack_sessions") or []
        if len(ids) != len(raw_sessions):
            issues.note("haystacks with mismatched session lists", qid)
        answer_sessions = {str(s) for s in item.get("answer_session_ids") or []}
        sessions: list[Session] = []
        evidence: list[str] = []
        for n_session, raw_turns in enumerate(raw_sessions):
            session_id = str(ids[n_session]) if n_session < len(ids) else f"session-{n_session}"
            started = parse_lme_date(dates[n_session]) if n_session < len(dates) else None
            if started is None:
                issues.note("session dates unparsed", f"{qid}: {session_id}")
            turns = []
            for k, raw in enumerate(raw_turns):
                text = str(raw.get("content") or "").strip()
                turn_id = f"{session_id}:{k}"
                if not text:
                    issues.note("empty turns skipped", f"{qid}: {turn_id}")
                    continue
                role: Role = "assistant" if raw.get("role") == "assistant" else "user"
                stamp = started + timedelta(seconds=k) if started else None
                turns.append(Turn(turn_id, session_id, role, role, text, stamp))
                if raw.get("has_answer") and session_id in answer_sessions:
                    evidence.append(turn_id)
            sessions.append(Session(session_id, tuple(turns)))
        qtype = str(item.get("question_type", "unknown"))
        abstention = qid.endswith("_abs")
        if not abstention and not evidence:
            issues.note("questions left without evidence", qid)
        question = Question(
            id=qid,
            conversation_id=qid,
            type=qtype,
            question=str(item.get("question", "")),
            reference=str(item.get("answer", "")),
            evidence_ids=tuple(evidence),
            abstention=abstention,
            judge_prompt="abstention" if abstention else _LME_PROMPTS.get(qtype, "default"),
            question_date=str(item["question_date"]) if item.get("question_date") else None,
        )
        conversations.append(Conversation(qid, "longmemeval", tuple(sessions), (question,)))
    return Dataset("longmemeval", str(path), conversations, issues)


# a sequence's messages are an hour apart, so that each is a later turn than the one before it
SEQUENCE_START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
SEQUENCE_STEP = timedelta(hours=1)
SEQUENCE_KINDS = ("update", "lookalike")


def load_sequences(path: str | Path, kind: str) -> Dataset:
    """Short chats of one user (a JSON-lines file) where a fact is stated, maybe changed, then asked.

    Each line: `id`, `kind`, `messages` (in order), `question`, `current` (the value true now, as
    written in its message) and, for `kind` "update", `stale` (the value it replaced, as written in
    the first message that has it) or, for "lookalike", `other` (a look-alike's value that leaves the
    fact as it was). Only the rows of `kind` are loaded, as the dataset `sequences-<kind>`. Both read
    as knowledge updates: an update's stale turn is the first with the old value and its current turn
    the last with the new one; a look-alike's current turn is the fact's own, and its "stale" turn the
    look-alike's, so that the figures say whether the fact stayed first and unflagged beside it.
    """
    if kind not in SEQUENCE_KINDS:
        raise ValueError(f"kind must be one of {SEQUENCE_KINDS}, not {kind!r}")
    issues = LoadIssues()
    conversations = []
    other_key = "stale" if kind == "update" else "other"
    for line_no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("kind") != kind:
            continue
        sid = str(row["id"])
        messages = [str(m) for m in row["messages"]]
        turns = tuple(
            Turn(f"m{i}", sid, "user", "user", text, SEQUENCE_START + i * SEQUENCE_STEP)
            for i, text in enumerate(messages, 1)
        )
        holding = [t.id for t in turns if row["current"] in t.text]
        others = [t.id for t in turns if row[other_key] in t.text and t.id not in holding]
        if not holding or not others:
            issues.note("sequences whose values are not in their messages", f"line {line_no}: {sid}")
            continue
        current, other = (holding[-1], others[0]) if kind == "update" else (holding[0], others[-1])
        question = Question(
            id=f"{sid}:q",
            conversation_id=sid,
            type=f"sequence-{kind}",
            question=str(row["question"]),
            reference=str(row["current"]),
            evidence_ids=(current,),
            stale_ids=(other,),
            current_ids=(current,),
            current_values=(str(row["current"]),),
            stale_values=(str(row[other_key]),),
            judge_prompt="knowledge-update" if kind == "update" else "default",
        )
        conversations.append(Conversation(sid, f"sequences-{kind}", (Session(sid, turns),), (question,)))
    return Dataset(f"sequences-{kind}", str(path), conversations, issues)


LOADERS: dict[str, Callable[[str | Path], Dataset]] = {
    "locomo": load_locomo,
    "beam": load_beam_tiered,
    "longmemeval": load_longmemeval,
    **{f"sequences-{kind}": functools.partial(load_sequences, kind=kind) for kind in SEQUENCE_KINDS},
}
