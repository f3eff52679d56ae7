"""The messages of the benchmarks' conversation files, to import (`beads-memory import`): LoCoMo,
BEAM (a chat folder's `chat.json`) and LongMemEval. Only what was said, by whom and when; their
questions and evidence are the evaluation harness's to read (bench.eval.loaders, which parses times
with the functions here).

Each file may hold several conversations: each is imported into its own session, named
`<prefix>-<its id>` (one conversation: the prefix alone).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory.graph.importing import ImportError_, ImportMessage, ImportRole

__all__ = [
    "BEAM_INDEX_MARKER",
    "locomo_session_numbers",
    "parse_beam_anchor",
    "parse_lme_date",
    "parse_locomo_date",
    "read_transcripts",
]

_LOCOMO_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.I)
_LME_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\(\w+\))?\s*(\d{1,2}):(\d{2})")
# BEAM appends its generation index to user messages ("... ->-> 1,1"); it duplicates the `index` field
BEAM_INDEX_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")


def parse_locomo_date(raw: object) -> datetime | None:
    """ "1:56 pm on 8 May, 2023" -> an aware datetime (UTC: the data names no zone)."""
    match = _LOCOMO_DATE.search(str(raw or ""))
    if not match:
        return None
    hour, minute, half, day, month, year = match.groups()
    try:
        parsed = datetime.strptime(f"{day} {month[:3]} {year} {hour}:{minute} {half}", "%d %b %Y %I:%M %p")
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC)


def parse_beam_anchor(raw: object) -> datetime | None:
    """ "March-15-2024" -> an aware datetime."""
    for fmt in ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d"):
        try:
            return datetime.strptime(str(raw), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def parse_lme_date(raw: object) -> datetime | None:
    """ "2023/05/20 (Sat) 02:21" -> an aware datetime."""
    match = _LME_DATE.search(str(raw or ""))
    if not match:
        return None
    year, month, day, hour, minute = (int(g) for g in match.groups())
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError:
        return None


def locomo_session_numbers(body: dict[str, Any]) -> list[int]:
    """The numbers of a LoCoMo conversation's sessions (`session_<n>` lists), in order."""
    return sorted(
        int(m.group(1))
        for key, value in body.items()
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(value, list)
    )


def _locomo(data: Any) -> dict[str, list[ImportMessage]]:
    # both speakers are people talking about their own lives: both are users, each with their name
    out: dict[str, list[ImportMessage]] = {}
    for n_sample, sample in enumerate(data):
        conv_id = str(sample.get("sample_id") or f"locomo-{n_sample}")
        body = sample.get("conversation") or {}
        numbers = locomo_session_numbers(body)
        messages: list[ImportMessage] = []
        for number in numbers:
            started = parse_locomo_date(body.get(f"session_{number}_date_time"))
            for k, raw in enumerate(body[f"session_{number}"]):
                text = str(raw.get("text") or "").strip()
                if raw.get("blip_caption"):
                    text = f"{text} [shares a photo: {raw['blip_caption']}]".strip()
                if not text:
                    continue
                messages.append(
                    ImportMessage(
                        text=text,
                        role="user",
                        message_id=str(raw.get("dia_id") or f"D{number}:{k + 1}"),
                        thread_id=f"session_{number}",
                        speaker=str(raw.get("speaker") or "unknown"),
                        # a turn's session's date, a second per turn to keep their order
                        time=started + timedelta(seconds=k) if started else None,
                    )
                )
        out[conv_id] = messages
    return out


def _beam(data: Any, conv_id: str) -> dict[str, list[ImportMessage]]:
    messages: list[ImportMessage] = []
    anchor: datetime | None = None
    ordinal = 0
    seen: set[str] = set()
    for n_batch, batch in enumerate(data):
        thread = f"batch-{batch.get('batch_number', n_batch + 1)}"
        anchor = parse_beam_anchor(batch.get("time_anchor")) or anchor
        groups = batch.get("turns") or []
        for message in (m for group in groups for m in (group if isinstance(group, list) else [group])):
            anchor = parse_beam_anchor(message.get("time_anchor")) or anchor
            message_id = str(message.get("id", f"{thread}:{ordinal}"))
            if message_id in seen:
                message_id = f"{message_id}#{ordinal}"
            seen.add(message_id)
            ordinal += 1
            text = BEAM_INDEX_MARKER.sub("", str(message.get("content") or "")).strip()
            if not text:
                continue
            role: ImportRole = "assistant" if message.get("role") == "assistant" else "user"
            messages.append(
                ImportMessage(
                    text=text,
                    role=role,
                    message_id=message_id,
                    thread_id=thread,
                    time=anchor + timedelta(seconds=ordinal) if anchor else None,
                )
            )
    return {conv_id: messages}


def _longmemeval(data: Any) -> dict[str, list[ImportMessage]]:
    out: dict[str, list[ImportMessage]] = {}
    for n_item, item in enumerate(data):
        qid = str(item.get("question_id", f"q{n_item}"))
        ids = item.get("haystack_session_ids") or []
        dates = item.get("haystack_dates") or []
        messages: list[ImportMessage] = []
        for n_session, raw_turns in enumerate(item.get("haystack_sessions") or []):
            thread = str(ids[n_session]) if n_session < len(ids) else f"session-{n_session}"
            started = parse_lme_date(dates[n_session]) if n_session < len(dates) else None
            for k, raw in enumerate(raw_turns):
                text = str(raw.get("content") or "").strip()
                if not text:
                    continue
                role: ImportRole = "assistant" if raw.get("role") == "assistant" else "user"
                messages.append(
                    ImportMessage(
                        text=text,
                        role=role,
                        message_id=f"{thread}:{k}",
                        thread_id=thread,
                        time=started + timedelta(seconds=k) if started else None,
                    )
                )
        out[qid] = messages
    return out


def detect(data: Any) -> str | None:
    """Which benchmark's layout `data` (a parsed JSON file) has, or None."""
    if isinstance(data, list) and data and isinstance(data[0], dict):
        if "conversation" in data[0]:
            return "locomo"
        if "haystack_sessions" in data[0]:
            return "longmemeval"
        if "turns" in data[0]:
            return "beam"
    return None


def read_transcripts(path: str | Path, fmt: str, prefix: str) -> dict[str, list[ImportMessage]]:
    """The conversations of a benchmark file, each under its session id (`<prefix>-<its id>`, or the
    prefix alone for a file of one conversation)."""
    path = Path(path)
    if path.is_dir():
        path = path / "chat.json"  # a BEAM chat folder
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ImportError_(f"not JSON (line {exc.lineno}: {exc.msg})") from None
    kind = detect(data) if fmt == "auto" else fmt
    if kind == "locomo":
        conversations = _locomo(data)
    elif kind == "beam":
        conversations = _beam(data, path.parent.name or "chat")
    elif kind == "longmemeval":
        conversations = _longmemeval(data)
    else:
        raise ImportError_(
            "not a layout the importer knows: a JSON-lines chat (.jsonl), LoCoMo, a BEAM chat.json or LongMemEval"
        )
    if len(conversations) == 1:
        return {prefix: next(iter(conversations.values()))}
    return {f"{prefix}-{conv_id}": messages for conv_id, messages in conversations.items()}
