"""Does a new claim correct an old one? Rules from how people correct themselves; no model.

`judge(old, new)` decides whether claim `new`, stated after `old`, replaces it: the two must be about
the same slot (the same thing of the same owner) and `new` must give that slot another value, or say
the old state ended. Each rule traces to a way people restate or correct a fact:

  values      what a correction changes: an amount, a number with its unit, a date or a time, a
              version, a name (a capitalised word inside the sentence), or a state ("no longer X").
  slot        a changed value must sit among the same content words in both claims (its context:
              the words around it in its clause), so "$120k per year" aligns with "$100k per year"
              and not with "12 engineers".
  subject     the thing a claim is about (the words before its verb) must be the same: another
              person ("my brother" against "I"), another pet or owner ("my cat Luna" against "my dog
              Rex") or another qualifier of the same thing ("the marketing budget" against "the
              engineering budget") makes them look-alikes, never versions of one claim.
  additions   "also", "too", "another", "as well": the new claim adds a value, it replaces none.
  history     "used to", "previously", "back in 2019": a past state told as history sits beside
              the present one; it neither replaces it nor is replaced.
  ambiguity   a new claim that states the old value too, without marking it as the old one
              ("from", "not", "instead of"), lists values; it corrects none.

  intent      a changed value in an aligned slot is a correction only with a sign that the speaker
              means one: a strong cue just before the new value ("moved it to Friday", "correction:
              ..."), the old value named as the old one ("from Friday to Monday"), a weak cue ("now")
              with two slot words, or a restatement (the same words around another value). Long
              chats about one project are full of dated plans and amounts of different things that
              share a word; without this, each would retire something the user still means.
  code        a line of code pasted into a chat ("margin: 20px;") states nothing about the user.

Where the rules cannot decide, `judge` says no and both facts stay active: ranking then orders them
(memory.rules.slots). Everything here is a pure function of the two texts.

One module per concept, each using only those before it:

  vocabulary      how the rules cut and stem words, and the classes of words they pass over
  stated_values   the values a text states, their kinds and normal forms
  claims          one claim read on its own: its subject, how it is told, its clauses
  subjects        whether two claims are about the same thing of the same owner
  cues            whether the speaker means a change: cues, the old value named, restatements
  alignment       which values of two claims fill one slot; ranking's and capture's slot tests
  verdicts        the judge, and which claims state something that could be corrected
"""

from memory.rules.corrections.alignment import may_order, may_share_slot, restates, same_slot, topic_and_kinds
from memory.rules.corrections.claims import asks, looks_like_code, says_one_thing
from memory.rules.corrections.cues import asks_about_earlier, is_strong_cue
from memory.rules.corrections.stated_values import Value, names_a_value, values
from memory.rules.corrections.verdicts import Verdict, judge, states_something
from memory.rules.corrections.vocabulary import (
    SHORT_MESSAGE_CHARS,
    SHORT_MESSAGE_WORDS,
    same_words,
    short_message,
    word_count,
)

__all__ = [
    "SHORT_MESSAGE_CHARS",
    "SHORT_MESSAGE_WORDS",
    "Value",
    "Verdict",
    "asks",
    "asks_about_earlier",
    "is_strong_cue",
    "judge",
    "looks_like_code",
    "may_order",
    "may_share_slot",
    "names_a_value",
    "restates",
    "same_slot",
    "same_words",
    "says_one_thing",
    "short_message",
    "states_something",
    "topic_and_kinds",
    "values",
    "word_count",
]
