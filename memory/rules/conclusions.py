"""Which final answers are worth keeping as the agent's conclusions.

A turn's final answer is captured as a `conclusion` so later threads can recall what was concluded.
An answer that is not a statement poisons that: a small model that meant to call a tool but wrote the
call as text (`{"name": "our_budget", "arguments": {"budget": "1200000"}}`, or a `<tool_call>` block,
for a tool that is bound or not), an empty reply, or an error message would be injected into later
calls as if it were a fact. None of them is captured.

A bare name ("launch_deadline", "Mozilla") is no statement either (`is_bare_name`). The same holds
for a tool's result that is only a failure notice ("Web search is unavailable right
now (ConnectError ...)"): it says nothing about the world, and a later thread that recalled it would
read an outage as memory (`is_failure_notice`).

`why_no_answer` is the one rule for "is this a reply at all": the playground shows a lane's final
text only when it passes, and capture keeps it as a conclusion only then. Besides the cases above it
refuses a tool's result said back, the user's question said back, and a reply about the agent's own
tools ("I will call search_memory", "This tool returned ...") instead of the user's matter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from memory.rules.corrections import same_words
from memory.rules.corrections.vocabulary import word_set
from memory.rules.splitting import split_message

__all__ = [
    "OPEN_TAG",
    "is_bare_name",
    "is_conclusion",
    "is_failure_notice",
    "repeats",
    "states_nothing",
    "why_no_answer",
    "without_lead_in",
]

#: how a Qwen-style model opens a tool call it writes as text (the offline chat model parses these)
OPEN_TAG = "<tool_call>"

_FENCE = re.compile(r"\A```[ \t]*(?:json|tool_call)?[ \t]*\n?(.*?)\n?```\s*\Z", re.DOTALL | re.IGNORECASE)
_CALL_KEYS = frozenset({"arguments", "args", "parameters"})
_ERROR = re.compile(
    r"\A(?:error|exception|traceback|internal server error)\b[\s:(]|Traceback \(most recent call last\)",
    re.IGNORECASE,
)
_decoder = json.JSONDecoder()
# a notice is short; a page that mentions an outage among other things is content
_NOTICE_CHARS = 400
_FAILURE = re.compile(
    r"\b(?:is|are|was|were)\s+(?:currently\s+|temporarily\s+)?(?:unavailable|unreachable|down|offline)\b"
    r"|\b(?:could|can)\s*(?:not|n't)\s+(?:connect|reach|resolve|fetch|load)\b"
    r"|\btimed\s+out\b|\bno (?:network|internet|connection)\b"
    r"|\b[A-Z]\w*(?:Error|Exception)\b",
)


def is_failure_notice(text: str) -> bool:
    """True for a short text that reports a failure (an error, a timeout, a service that is down)
    rather than stating anything: what a tool returns when it could not do its work."""
    stripped = text.strip()
    if not stripped:
        return False
    if _ERROR.search(stripped):
        return True
    return len(stripped) <= _NOTICE_CHARS and bool(_FAILURE.search(stripped))


_BARE_NAME = re.compile(r"[A-Za-z_][\w.:/-]*")


def is_bare_name(text: str) -> bool:
    """A key or identifier with no claim in it ("launch_deadline", "Mozilla"): a small model's idea
    of a fact, or of an answer."""
    return _BARE_NAME.fullmatch(text.strip()) is not None


def states_nothing(text: str) -> bool:
    """What the agent wrote that is no memory: a failure notice, or a bare name."""
    return is_failure_notice(text) or is_bare_name(text)


def is_conclusion(text: str) -> bool:
    """True for an answer in words; False for empty text, a tool call written as text, or an error."""
    stripped = text.strip()
    if not stripped or _ERROR.search(stripped):
        return False
    return not _is_tool_call_text(stripped)


def _is_tool_call_text(text: str) -> bool:
    if OPEN_TAG in text or "</tool_call>" in text:
        return True
    fenced = _FENCE.match(text)
    body = (fenced.group(1) if fenced else text).strip()
    if not body.startswith(("{", "[")):
        return False
    try:
        value, _ = _decoder.raw_decode(body)
    except ValueError:
        return False
    # a call object (or a list of them) that the model ran on after is still a call attempt
    calls = value if isinstance(value, list) else [value]
    return bool(calls) and all(_looks_like_call(c) for c in calls)


def _looks_like_call(value: object) -> bool:
    return (
        isinstance(value, dict) and "name" in value and (bool(_CALL_KEYS & value.keys()) or len(value) == 1)
    )


# A lead-in a small model writes before what it found, often the tool's own description said back
# ("The summary of what was found for the agent that delegated it is: ..."): a short clause ending
# in a colon that names the report itself. Kept, it makes the finding a line that matches no claim.
_LEAD_IN = re.compile(
    r"\A\s*(?P<lead>[^:\n]{0,120}?\b(?:summary|summarized|found|findings?|results?|answer|conclusions?|"
    r"concluded|here is|here's)\b[^:\n]{0,80}):\s*\n?\s*(?P<rest>\S.*)\Z",
    re.IGNORECASE | re.DOTALL,
)
_LEAD_IN_WORDS = 16


def without_lead_in(text: str) -> str:
    """`text` without a lead-in clause that only announces it ("Here is what I found: ..."), and
    without the quotes a small model then puts around the rest."""
    found = _LEAD_IN.match(text)
    if found is None or len(found["lead"].split()) > _LEAD_IN_WORDS:
        return text
    rest = found["rest"].strip()
    if len(rest) >= 2 and rest[0] in "\"'\u201c" and rest[-1] in "\"'\u201d" and rest.count(rest[0]) <= 2:
        rest = rest[1:-1].strip()
    return rest or text


# the share of an answer's words found in one tool result for the answer to be that result said back
_REPEATED_SHARE = 0.8


def repeats(answer: str, said: str) -> bool:
    """True when `answer` is `said` said back: nearly all of its words are `said`'s. A final answer
    that repeats a tool's result (memory's own notices, a sub-agent's summary already rolled up, a
    page already captured) is no new conclusion."""
    words = same_words(answer).split()
    if not words:
        return False
    theirs = set(same_words(said).split())
    return sum(w in theirs for w in words) >= _REPEATED_SHARE * len(words)


# who is speaking changes the pronouns, not the claim: "Your budget is $100k" says back "Our budget is
# $100k"
_PERSONS = word_set(
    "i me my mine myself we us our ours ourselves you your yours yourself yourselves im ive youre youve "
    "were weve m re ve s am are is"
)


def acknowledges(reply: str, said: str) -> bool:
    """True when `reply` only says back what the user `said` ("Got it! Your budget is $100k per year
    and it must be self-hostable."): every statement in it is nearly all the user's own words,
    pronouns aside, and the rest is framing or an offer ("Got it!", "Let me know how I can help!"). Such a reply
    answers well enough, but it is no conclusion: stored, it would be a second line for each of the
    user's claims, a version of them that a correction has to retire too."""
    theirs = set(same_words(said).split()) - _PERSONS
    claims = [c for c in split_message(reply) if c.kind == "user_input"]
    if not theirs or not claims:
        return False
    for claim in claims:
        words = [w for w in same_words(claim.text).split() if w not in _PERSONS]
        if not words or sum(w in theirs for w in words) < _REPEATED_SHARE * len(words):
            return False
    return True


# a reply about the agent's machinery: "This tool returned ...", "I will call the function ..."
_ABOUT_TOOLS = re.compile(
    r"\b(?:this|the|a|that)\s+(?:tool|function)(?:'s)?\s+(?:call\s+)?(?:returned|returns|was\s+called|"
    r"is\s+called|gave|provided|found|result)\b|\b(?:call(?:ing)?|use|using|invoke)\s+the\s+(?:tool|function)\b"
    # "This tool does not return any results.", "This is a tool response indicating that ..."
    r"|\b(?:this|the)\s+(?:tool|function)\s+(?:does|did)\s*(?:not|n't)\s+return\b"
    r"|\b(?:this|it)\s+(?:is|was)\s+(?:a|the)\s+tool(?:'s)?\s+(?:response|output|result)\b"
    # an intention to look in memory, in place of what it holds: "I need to search my long-term
    # memories for relevant information."
    r"|\b(?:i|let\s+me)\s+(?:need\s+to\s+|will\s+|'ll\s+|must\s+|should\s+|am\s+going\s+to\s+|"
    r"'m\s+going\s+to\s+)?(?:search|check|query|look\s+(?:up|through|in|into))\s+my\s+"
    r"(?:long-term\s+)?memor(?:y|ies)\b"
    # or a call of a snake_case name: a tool's, whether or not this agent holds it
    r"|\b(?:call(?:ing)?|use|using|invoke|invoking)\s+(?:the\s+)?`?[a-z]+(?:_[a-z]+)+`?",
    re.IGNORECASE,
)


# a one-word reply may well answer ("Dallas", "8KXR203"); a key or a hash does not ("launch_deadline")
_IDENTIFIER = re.compile(r"[A-Za-z]\w*_\w+|[A-Za-z0-9]{20,}")


def why_no_answer(
    text: str,
    *,
    asked: str = "",
    tool_results: Sequence[str] = (),
    tool_names: Iterable[str] = (),
) -> str | None:
    """Why `text`, an agent's final reply to `asked`, is no answer, or None when it is one.

    No answer: empty text, a tool call written as text, an error or failure notice, an identifier
    (a key, a tool's name, a hash), one of the turn's `tool_results` said back, the question said back, or a reply that talks of
    the agent's tools (one of `tool_names`, or "the tool returned ...") rather than answering.
    """
    stripped = text.strip()
    if not stripped:
        return "an empty reply"
    if _is_tool_call_text(stripped):
        return "a tool call written as text"
    if _ERROR.search(stripped) or is_failure_notice(stripped):
        return "an error or failure notice"
    if _IDENTIFIER.fullmatch(stripped.rstrip(".")):
        return "an identifier, not a sentence"
    if any(repeats(stripped, result) for result in tool_results if result.strip()):
        return "a tool's output said back"
    if asked.strip() and _says_back(stripped, asked):
        return "the question said back"
    named = [name for name in tool_names if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", stripped)]
    if named or _ABOUT_TOOLS.search(stripped):
        return "a reply about its tools" + (f" ({', '.join(sorted(set(named)))})" if named else "")
    return None


def _says_back(reply: str, asked: str) -> bool:
    # the question itself, or its words asked again: "What is our budget?" -> "what is our budget"
    mine = same_words(reply)
    return mine == same_words(asked) or (reply.rstrip().endswith("?") and repeats(reply, asked))
