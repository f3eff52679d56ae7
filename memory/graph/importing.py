"""Whole conversations into the fact graph at speed: the rows message-by-message capture writes, in bulk.

`FactStore.import_messages(ns, messages)` writes what capturing each message in turn writes (the same
claims, ids, passages, edges, supersessions and restatements: the rules see every earlier message,
as they would live), and differs only in how it gets there:

- embedding is batched across many messages (one model call per batch, where capture makes one per
  message), and runs one batch ahead: the next batch is split, checked against what is stored and
  embedded while this one is written, so that a model on another machine and the writes overlap,
- a batch of messages is written in one transaction with `synchronous_commit` off (one commit, not
  one durable flush per message; a crash loses at most the last batch, which a rerun writes again),
- the tables it fills are analyzed as they grow (after the first batch, then each time the facts
  have doubled), so that a new database is not planned as empty until autovacuum reaches it.

A rerun after a kill skips every message whose facts are all stored already, before embedding it,
so it resumes where the last committed batch ended.

What each role writes (the evaluation harness's policy, and the middleware's): a user's message is
captured verbatim and split into claims (with its speaker, where several people talk); a tool's
result is untrusted content; an assistant's turn is one conclusion, unsplit.

`read_jsonl` reads a plain JSON-lines chat (one message an object a line); `memory.doors.transcripts` reads
the benchmarks' formats.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from memory.errors import BeadsMemoryError

__all__ = ["ImportError_", "ImportMessage", "ImportReport", "batched", "read_jsonl"]

ImportRole = Literal["user", "assistant", "tool"]
ROLES: tuple[ImportRole, ...] = ("user", "assistant", "tool")


class ImportError_(BeadsMemoryError, ValueError):
    """A file to import is not what the importer reads; the message names the line and what is wrong."""


@dataclass(frozen=True, slots=True)
class ImportMessage:
    """One message of a conversation to import, in the order it was said."""

    text: str
    role: ImportRole = "user"
    message_id: str | None = None  # the key its facts are written under (default: the text's hash)
    thread_id: str | None = None  # the conversation (or session) it was said in
    speaker: str | None = None  # who said it, where several people share the memory
    time: datetime | None = None  # when it was said: its facts hold from then (valid_from)
    acting_on_behalf_of: str | None = None


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What one import did."""

    messages: int  # messages read
    skipped: int  # already stored (a rerun) or with nothing to store
    written: int  # facts inserted
    superseded: int  # facts the imported ones replaced
    seconds: float


def batched(items: Iterable[ImportMessage], size: int) -> Iterator[list[ImportMessage]]:
    batch: list[ImportMessage] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _message_of(raw: Any, where: str) -> ImportMessage:
    if not isinstance(raw, dict):
        raise ImportError_(f"{where}: a message is a JSON object, not {type(raw).__name__}")
    text = raw.get("text", raw.get("content"))
    if not isinstance(text, str) or not text.strip():
        raise ImportError_(f'{where}: needs a non-empty "text" (or "content") string')
    role = raw.get("role", "user")
    if role not in ROLES:
        raise ImportError_(f'{where}: "role" is {role!r}; one of {", ".join(ROLES)}')
    when = raw.get("time")
    stamp: datetime | None = None
    if when is not None:
        try:
            stamp = datetime.fromisoformat(str(when))
        except ValueError:
            raise ImportError_(f'{where}: "time" {when!r} is not an ISO 8601 time') from None
        if stamp.tzinfo is None:
            raise ImportError_(f'{where}: "time" {when!r} has no offset (e.g. 2026-01-01T09:00:00+00:00)')
    fields: dict[str, str | None] = {}
    for name, key in (("message_id", "id"), ("thread_id", "thread"), ("speaker", "speaker")):
        value = raw.get(key)
        if value is not None and not isinstance(value, str | int):
            raise ImportError_(f'{where}: "{key}" must be a string')
        fields[name] = None if value is None else str(value)
    return ImportMessage(text=text, role=role, time=stamp, **fields)


def read_jsonl(path: str | Path) -> list[ImportMessage]:
    """A JSON-lines chat: one object a line, `{"role": "user"|"assistant"|"tool", "text": ...,
    "id": ..., "thread": ..., "speaker": ..., "time": "2026-01-01T09:00:00+00:00"}` (all but the
    text optional; "content" may stand for "text"). Read whole before anything is written: a bad
    line stops the import with its number and nothing half-written."""
    messages: list[ImportMessage] = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportError_(f"line {number}: not JSON ({exc.msg})") from None
            messages.append(_message_of(raw, f"line {number}"))
    return messages


ProgressFn = Callable[[int, int], None]  # (messages done, written so far)


def progress_printer(total: int, stream: Any) -> ProgressFn:
    """A one-line progress bar on `stream` (a terminal's stderr), redrawn in place."""
    import time

    started = time.perf_counter()

    def show(done: int, written: int) -> None:
        rate = done / max(time.perf_counter() - started, 1e-9)
        filled = int(30 * done / max(total, 1))
        stream.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} messages, {written} facts, {rate:.0f} msg/s"
        )
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


def total_of(messages: Sequence[ImportMessage] | Iterable[ImportMessage]) -> int | None:
    return len(messages) if isinstance(messages, Sequence) else None
