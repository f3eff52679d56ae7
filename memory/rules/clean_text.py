"""What text any door may store, decided in one place.

Postgres cannot store a NUL character (U+0000) in text, and a lone surrogate (JSON may spell one,
"\\ud800") is not valid UTF-8; either would fail the write with a driver error, and a capture that
fails on arrival fails again each time the same thread is read. Other C0 control characters store,
but carry nothing a reader can use and confuse the splitter's line breaks.

Two ways to treat such text, each for its door:
- `cleaned`: capture (the middleware, FactStore.capture_message, BeadsStore): a message the model is
  answering anyway is stored as far as it can be, its NULs and controls dropped and its lone
  surrogates replaced by U+FFFD, and the notes say what was changed;
- `problem`: the doors that answer their caller (the HTTP API, MCP) refuse such text with the reason,
  so that what they store is exactly what was sent.

Everything else is kept as it came: right-to-left text, emoji, zero-width characters, tabs and line
breaks are text.

`clip` bounds what capture keeps of a message too long to store whole, at a sentence or word edge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_MESSAGE_CHARS", "Cleaned", "cleaned", "clip", "problem"]

# the longest message a door takes whole unless told otherwise: the HTTP API and MCP refuse a longer
# one, capture (the middleware, FactStore.capture_message) keeps its first this-many characters
DEFAULT_MAX_MESSAGE_CHARS = 8_000

_NUL = "\x00"
# C0 controls other than tab, line feed and carriage return, and DEL; vertical tab and form feed are
# line breaks to the splitter (memory.rules.splitting), so they become one
_CONTROLS = re.compile(r"[\x01-\x08\x0e-\x1f\x7f]")
_BREAKS = re.compile(r"[\x0b\x0c]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # in a Python str, only a lone one is ever seen


@dataclass(frozen=True, slots=True)
class Cleaned:
    """Text made storable, and what was changed to make it so (empty when nothing was)."""

    text: str
    notes: tuple[str, ...] = ()


def _plural(n: int, one: str) -> str:
    return f"{n} {one}" if n == 1 else f"{n} {one}s"


def cleaned(text: str) -> Cleaned:
    """`text` with what Postgres cannot store, or a reader cannot use, taken out."""
    notes: list[str] = []
    if nuls := text.count(_NUL):
        text = text.replace(_NUL, "")
        notes.append(f"removed {_plural(nuls, 'NUL character')} (U+0000)")
    text, controls = _CONTROLS.subn("", text)
    if controls:
        notes.append(f"removed {_plural(controls, 'control character')}")
    text = _BREAKS.sub("\n", text)
    text, surrogates = _SURROGATE.subn("\ufffd", text)
    if surrogates:
        notes.append(f"replaced {_plural(surrogates, 'lone surrogate')} with U+FFFD")
    return Cleaned(text, tuple(notes))


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (what a tokenizer can read)."""
    return _SURROGATE.sub("\ufffd", text)


def problem(text: str) -> str | None:
    """Why `text` cannot be stored as sent (a phrase to follow a field's name), or None."""
    if _NUL in text:
        return "contains a NUL character (U+0000), which cannot be stored"
    if _SURROGATE.search(text):
        return "contains a lone surrogate, which is not valid UTF-8"
    return None


# a clip ends at a sentence end, else a line break, else a space, if one lies this close to the limit
_EDGE_WINDOW = 400
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s")


def clip(text: str, limit: int) -> str:
    """At most `limit` characters of `text`, cut at the last sentence end (else line break, else
    space) within the last few hundred characters before the limit, so that no claim is cut in two."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    floor = max(0, limit - _EDGE_WINDOW)
    ends = [m.end() for m in _SENTENCE_END.finditer(head, floor)]
    if ends:
        return head[: ends[-1]].rstrip()
    for edge in ("\n", " "):
        at = head.rfind(edge, floor)
        if at > 0:
            return head[:at].rstrip()
    return head
