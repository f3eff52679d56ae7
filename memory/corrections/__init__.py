"""Does a new claim correct an old one? The correction rules, about to be split by concept."""

from memory.corrections.stated_values import (
    Value,
    Verdict,
    asks,
    is_strong_cue,
    judge,
    looks_like_code,
    may_share_slot,
    names_a_value,
    restates,
    same_slot,
    says_one_thing,
    states_something,
    values,
    word_count,
)

__all__ = [
    "Value",
    "Verdict",
    "asks",
    "is_strong_cue",
    "judge",
    "looks_like_code",
    "may_share_slot",
    "names_a_value",
    "restates",
    "same_slot",
    "says_one_thing",
    "states_something",
    "values",
    "word_count",
]
