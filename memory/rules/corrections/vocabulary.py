"""The words the correction rules read, and the words they pass over.

Every rule compares words: the content words around a value are its slot, the words before the verb
are a claim's subject, a cue word marks a change. So all of them cut a text into words (`WORD`,
`word_count`) and stem them (`stem`) alike, and all skip the same closed classes, which are here:
stop words and cue words (no part of any slot), the words for the speaker and for other people
(whose claim it is), verbs (where a subject ends), determiners. Two claims then meet on the words
that name a thing, and on nothing else.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


def word_set(spec: str) -> frozenset[str]:
    return frozenset(spec.split())


WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’+#.-]*[A-Za-z0-9+#]|[A-Za-z]")


@functools.lru_cache(maxsize=16384)
def same_words(text: str) -> str:
    """What makes two texts the same words to a reader: their words, case and punctuation aside."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def word_count(text: str) -> int:
    """How many words `text` has, counted as the rules count them."""
    return sum(1 for _ in WORD.finditer(text))


# A short message: at most this many words, a chat turn of a sentence or three ("Follow-up went fine
# today. Dr. Osei increased my dose, I'm now on 100mg, same time of day. She also wants bloodwork in
# six weeks." is 24). The same cue, or the same look-alike value, reads differently in a one-line
# message and in a paragraph. Every wrong automatic edge read on real chats had a message longer than
# this (for the closest pair, the longer one had 32 words; memory.graph.supersession); at 20, a
# correction typed with a sentence of news around it was only proposed.
SHORT_MESSAGE_WORDS = 30
# ... and at most this many characters: a pasted blob of few "words" is no chat turn. Whoever tells a
# short message from a long one needs no more of it than one character past this.
SHORT_MESSAGE_CHARS = 1_000


def short_message(text: str) -> bool:
    """Whether `text`, a whole message (or its first SHORT_MESSAGE_CHARS + 1 characters), is a short
    one: what decides whether capture's rules write an edge or only propose one, and whether ranking
    marks an older claim as outdated or only orders it (memory.rules.slots)."""
    return len(text) <= SHORT_MESSAGE_CHARS and word_count(text) <= SHORT_MESSAGE_WORDS


_DOUBLED = frozenset("bdgmnprt")  # consonants doubled before -ed / -ing that the bare word has once


# every rule stems every word it reads, and a session's words repeat: each is stemmed once
@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ies", "es", "s", "ed", "ing"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            # "running" / "run", "planned" / "plan": the consonant doubled before the suffix goes
            # ("called", "passed" keep theirs, as "call" and "pass" do; "added" is still "add")
            if suffix in ("ed", "ing") and len(w) >= 4 and w[-1] == w[-2] and w[-1] in _DOUBLED:
                w = w[:-1]
            break
    # "smoke" / "smoking", "live" / "lived": the bare form's final e goes too, so both meet
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


@dataclass(frozen=True, slots=True)
class Spans:
    """Spans of one text (its values), sorted once, so that whether a position falls inside one is
    answered in log time: a rule that reads the words around each of a long claim's values asks it
    for every word of every value's clause."""

    starts: tuple[int, ...]  # the spans' starts, ascending
    reach: tuple[int, ...]  # reach[i]: the furthest end among the first i spans (reach[0] = -1)

    @classmethod
    def of(cls, spans: Iterable[tuple[int, int]]) -> Spans:
        ordered = sorted(spans)
        reach = [-1]
        for _, end in ordered:
            reach.append(max(reach[-1], end))
        return cls(tuple(start for start, _ in ordered), tuple(reach))

    def covers(self, position: int) -> bool:
        """Whether `position` is inside a span (at or after its start, before its end)."""
        return position < self.reach[bisect.bisect_right(self.starts, position)]


def outside(words: Iterable[re.Match[str]], spans: Spans | list[tuple[int, int]]) -> list[re.Match[str]]:
    """The words (in text order) that start inside none of `spans`."""
    return list(outside_lazily(words, spans))


def outside_lazily(
    words: Iterable[re.Match[str]], spans: Spans | list[tuple[int, int]]
) -> Iterator[re.Match[str]]:
    """`outside`, one word at a time: a reader that needs the first few stops reading there."""
    covered = spans if isinstance(spans, Spans) else Spans.of(spans)
    return (word for word in words if not covered.covers(word.start()))


STOP = word_set(
    "a an the and or but if of to in on at by for with from into onto over under about as is are was were be "
    "been being am do does did done have has had having it its it's this that these those there here then than "
    "so very just really quite my our your his her their me us him them i we you he she they i'm we're i've "
    "we've i'd we'd i'll we'll you're they're it'll what which who whom whose when where why how all any some "
    "each every no not can could would should will shall may might must up down out off per via one also too "
    "still yet now currently actually correction update updated new latest recently anymore longer again "
    "just right sorry oops wait instead rather meant mean sure let me know please thanks "
    "got get gets getting go goes going gone went make made makes "
    # words too general to anchor a slot: "last", "time", "really", "great" sit beside any value
    "last next first time times day really good great nice love like lot lots thing things something "
    "way ways much many more most little bit kind sort pretty super awesome amazing fun glad happy "
    "hope think know see say said tell told feel felt thank thanks congrats congratulations hey hi "
    # what a chat message opens or closes with, around any claim: "ok launch got pushed", "ugh"
    "ok okay yeah yes yep nope well anyway anyways lol haha ugh tbh honestly basically btw hmm oh ah "
    # when something happened qualifies no thing: "after completing" / "already completed"
    "after before already during until ever never often always usually sometimes"
)
# Words that mark the new claim as a correction; they are not part of any slot. Which of them are
# enough to show that the speaker means one is memory.rules.corrections.cues' question.
CUES = word_set(
    "actually correction correct corrected update updated now currently changed change changes changing "
    "moved move moves switched switch switches swapped replaced raised increased decreased lowered dropped "
    "reduced bumped upgraded downgraded migrated grew grown reached rose fell went became become becomes "
    "new newest latest recently since instead rather longer anymore revised revise amended amend fixed "
    "rescheduled postponed pushed shifted turns turned improved misremembered misspoke mistaken wrong"
)
# Who or what a claim is about, when its subject is a person: these are other people (or pets).
RELATIONS = word_set(
    "brother sister wife husband partner spouse mom mother dad father son daughter friend boss manager "
    "colleague coworker co-worker roommate neighbor neighbour kid kids child children cousin aunt uncle "
    "grandma grandpa grandmother grandfather boyfriend girlfriend fiance fiancee teammate landlord "
    "doctor dog cat puppy kitten horse bird parrot fish hamster rabbit pet client customer parent "
    "parents folks family grandparents in-laws nephew niece"
)
SELF = word_set("i i'm i've i'd i'll we we're we've we'd we'll me us myself ourselves")
SELF_POSSESSIVE = word_set("my our")
# Words that end a subject: a verb or an auxiliary. Subjects are short, so the scan stops early.
VERBISH = word_set(
    "is are was were be been am has have had do does did will would can could should must may might shall "
    "isn't aren't wasn't weren't doesn't don't didn't won't can't cannot "
    "works work worked working lives live lived living runs run ran running uses use used using costs cost "
    "takes take took leads lead led manages manage managed owns own owned drives drive drove plays play "
    "played weighs weigh weighed earns earn earned pays pay paid starts start started begins begin began "
    "ends end ended sits sit sat meets meet met holds hold held needs need needed wants want wanted "
    "prefers prefer preferred likes like liked loves love loved hates hate hated drinks drink drank eats "
    "eat ate reports report reported moved move switched switch changed change got get gets became become "
    "becomes stands stand stood goes go went comes come came has reached reach hit hits "
    "grew grows rose rises fell falls dropped drops"
)
DETERMINERS = word_set("my our your his her their the a an this that")
