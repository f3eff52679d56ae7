"""Standing instructions: what a user asks of the assistant for every later turn, not for this one.

"Always use 24-hour time when I ask about meetings", "Never suggest Java libraries", "From now on,
answer in Spanish", "Whenever I share code, please add type hints". A question's request is done
once the reply is given; a standing instruction holds until the user takes it back, on whatever turn
its subject comes up again, and by then nothing the user says names it. Retrieval by similarity to the
question finds it only where the question happens to share its words: capture pins it instead, so
that it is in every prompt (memory.graph.pins), as a pin the user placed would be.

Read on one claim (a sentence), after splitting (memory.rules.splitting). A standing instruction
opens with its marker, past a leading "please", "actually", "correction:" or "remember to":

- `always` / `never` / `don't ever`, then a verb in the imperative ("always include", "never use");
- `from now on` / `going forward` / `in future` / `whenever ...,` / `every time ...,`, then an
  imperative, or "you" with a modal ("from now on, you should ...").

What the marker is followed by decides: "Always the same error", "Never heard of it", "From now on
I'll work remotely" and "Whenever I run it, it crashes" state things; they are not instructions.
A question ("Can you always ...?") is not read as one: the reply answers whether.
"""

from __future__ import annotations

import functools
import re

__all__ = ["is_standing_instruction"]

# Longer claims are a paragraph that happens to open with "Always": what it asks is not one rule.
_MAX_CHARS = 400

_LEAD = re.compile(
    r"(?:(?:please|pls|kindly|and|also|so|but|ok|okay|oh|now|then|just|actually|sorry|instead|"
    r"correction|update|remember to|make sure to|"
    r"make sure you|be sure to|i want you to|i'd like you to|i would like you to)\b[,:]?\s+)*"
)
# "always" and its kin: the next word must be an imperative verb ("never mind" waves something off)
_FREQUENCY = re.compile(r"(?:always|never(?! mind\b)|don't ever|do not ever)\b\s*")
# a time from which, or a condition on which, the rest holds: the clause after it must instruct
_FROM_NOW = re.compile(
    r"(?:(?:from now on|from here on(?: out)?|going forward|moving forward|in (?:the )?future|"
    r"for (?:all )?future (?:\w+\s+){0,2}?(?:answers|replies|responses|requests|questions))\s*[,:]?"
    r"|(?:whenever|every time|each time|any time|anytime)\b[^,.;:!?]{1,160},)\s*"
)
_YOU_MODAL = re.compile(
    r"(?:you|u)\s+(?:should|must|need to|have to|will|shall|are to|'ll|can|could)\b|you'll\b|you're to\b"
)

# Words that cannot open an imperative: articles, pronouns and the like ("always the same", "never
# again", "always so slow"), forms of "be" and "have" that state ("never been", "always was").
_NOT_A_VERB_WORDS = """a an the this that these those my your our his her their its it i we he she they you me us them
    there here so too very again more less much many some any all every each no not one only just still
    yet already ever even also as at in on of for to with by from about when where while if because
    been was were is are am had has did does got gets went gone thought knew felt saw said made took
    came found gave told became left ran brought wrote heard seemed worked tried wanted needed loved
    liked hated happy sad good bad great fun nice hard easy late early busy true right wrong sure
    up down out off done seen gotten"""
_NOT_A_VERB = frozenset(_NOT_A_VERB_WORDS.split())


# asked of each claim three times at capture (splitting's kind, the pin, the correction rules' parse)
# and of each line a block's ranking compares: one reading a text
@functools.lru_cache(maxsize=8192)
def is_standing_instruction(claim: str) -> bool:
    """Whether `claim` asks the assistant for something on every later turn it applies to (module
    docstring): an imperative opened by "always", "never", "from now on", "whenever ...," and kin."""
    text = claim.strip()
    if not text or len(text) > _MAX_CHARS or text.rstrip("\"')]} ").endswith("?"):
        return False
    head = text.lower().replace("’", "'")
    head = head[_LEAD.match(head).end() :]  # type: ignore[union-attr]  # matches the empty string
    if frequency := _FREQUENCY.match(head):
        return _imperative(head[frequency.end() :])
    if from_now := _FROM_NOW.match(head):
        rest = head[from_now.end() :]
        rest = rest[_LEAD.match(rest).end() :]  # type: ignore[union-attr]
        if _YOU_MODAL.match(rest):
            return True
        if frequency := _FREQUENCY.match(rest):  # "from now on, always ..."
            rest = rest[frequency.end() :]
        return _imperative(rest)
    return False


def _imperative(rest: str) -> bool:
    """Whether `rest` opens with a verb in the imperative: a plain word that is none of the words that
    cannot start one, nor a past or -ing form, nor a verb's third person ("always uses")."""
    match = re.match(r"[a-z]+(?:-[a-z]+)?", rest)
    if match is None:
        return False
    word = match.group()
    if word in _NOT_A_VERB or word.endswith(("ed", "ing")):
        return False
    # "includes", "uses": a third person states a habit ("it always crashes"); "address", "focus" do not
    return not (word.endswith("s") and not word.endswith(("ss", "us", "is")))
