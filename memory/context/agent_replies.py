"""The agent's own replies in the block: after what the user said, unless the question asks for them.

A reply the agent wrote is captured whole, as one conclusion (`Kind.CONCLUSION` from passive capture,
memory.doors.capture.capture_answer; the bulk import writes an assistant turn the same way). Ranked
among the user's claims, a long reply's opening ("Sure! Setting up X is a good idea. Here are the
steps: ...") matches the question as well as the user's own words do, because it restates them, and
takes the room of several of them. What a memory block is for is what the user said; the agent can
say again what it would say. So the block shows the user's claims first and the agent's replies
after them, in their own order, while the budget lasts; unless the question asks what the agent said
or did ("What did you recommend for ...?", "your advice on ...", "what we covered"), when replies keep
their place by rank.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.model import Hit, Kind, Source

# A question about the agent's own words: a past act of "you" ("did you", "you suggested"), something
# of yours it said ("your advice"), or what the two went over together ("what we covered"). A
# request ("can you show me", "could you help") asks for new words, not for earlier ones; "in our
# conversations" says where to look, not whose words.
_ASKS_ABOUT_REPLIES = re.compile(
    r"\b(?:did|have|had) you\b|"
    r"\byou(?:'ve| have| had)? (?:\w+ )?(?:said|told|suggested|recommended|mentioned|explained|gave|"
    r"proposed|advised|described|showed|shown|shared|provided|wrote|written|helped|guided|walked|"
    r"taught|offered|outlined|listed|answered|replied|responded|pointed)\b|"
    r"\byour (?:advice|suggestions?|recommendations?|explanations?|answers?|repl(?:y|ies)|responses?|"
    r"guidance|feedback|examples?|tips?|steps|instructions|help)\b|"
    r"\bwe(?:'ve| have)? (?:discussed|covered|talked|went over|gone over|reviewed|looked at|worked (?:on|through))\b",
    re.IGNORECASE,
)


def asks_about_replies(question: str) -> bool:
    """Whether `question` asks what the agent said or did earlier, or what the conversation covered."""
    return bool(_ASKS_ABOUT_REPLIES.search(question))


def is_reply(hit: Hit) -> bool:
    """Whether `hit` is a reply the agent gave, captured as it was said. What the agent chose to keep
    (the remember tool), a sub-agent's result and a tool's output are not replies: each is there
    because someone meant it to be, or is the only copy of what it says."""
    return hit.fact.kind is Kind.CONCLUSION and hit.fact.source == Source.PASSIVE_CAPTURE


def replies_last(hits: Sequence[Hit], question: str) -> list[Hit]:
    """`hits` with the agent's replies after every other hit, each side in its own order; as they
    are where `question` asks about the agent's replies."""
    if asks_about_replies(question):
        return list(hits)
    return sorted(hits, key=is_reply)  # stable: False (not a reply) first, each side in rank order
