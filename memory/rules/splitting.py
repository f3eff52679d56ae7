"""Split a user message, verbatim, into one claim per fact.

Heuristics only, biased toward under-splitting: two claims kept as one fact cost a little recall, one
claim shredded stores fragments that mean nothing alone. Every claim is an exact substring of the message
(``message[start:end] == text``) so provenance is exact. Every pass is linear in the message length.

0. Code. A fenced block (a line opening with three backticks or tildes, to the line that closes it, or
   to the end of the message) is one claim, fences included: its lines are one piece of work the user
   handed over, and cut line by line they are fragments ("}", "return x") that crowd out what the
   user said about it.
1. Lines. Each line is a separate claim source; a leading bullet or list number is left out of the span.
2. Sentences. A line is cut after ``.``, ``!`` or ``?`` followed by whitespace, except inside brackets
   or double quotes, after an ellipsis, after a known abbreviation, dotted acronym or initial, and
   before a lowercase word (where the period was most likely not a sentence end).
3. Framing. Greetings, thanks, acknowledgements and hand-offs are dropped, whole or as a leading
   ``Hi team,`` / ``Quick update:``. Framing is a whitelist that must match the whole sentence (one
   free word is allowed: the addressee of a greeting), so anything with concrete content (a number,
   a product, a constraint) is never framing.
4. Clauses. A sentence is cut at ``;`` when both sides are substantial, and at ``, and`` / ``and also``
   only when both sides are independent clauses. Commas alone never cut.
5. Kind. Questions, requests and stated goals are directives; everything else is user input, and so is a
   goal that carries a value (a number, a date, an amount): it says where things stand. So is a
   standing instruction ("please always answer in metric units"): a rule for every later turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from memory.rules.standing import is_standing_instruction

__all__ = ["Claim", "ClaimKind", "classify", "is_framing", "split_message", "states_a_goal"]

ClaimKind = Literal["user_input", "directive"]


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim of a message: ``text == message[start:end]``, surrounding whitespace excluded."""

    text: str
    start: int
    end: int
    kind: ClaimKind


_LINES = re.compile(r"[^\n\r\u2028\u2029\x85\x0b\x0c]+")
# Matched at the first non-space character of a line, so it cannot backtrack far.
_BULLET = re.compile(
    r"(?:[-*+•‣◦▪●○■>–—]|#{1,6}|\d{1,3}[.)]|[a-z][.)]|\(\d{1,3}\))[ \t]+(?:\[[ xX]\][ \t]+)?"
)
_TOKEN = re.compile(r"\S+")
_DOTTED = re.compile(r"(?:[^\W\d_]\.){2,}")  # "U.S.", "e.g.", "a.m."
_TERMINALS = ".!?…"
_TRAILERS = "\"'”’)]}»"
_PUNCT = ".,;:!?\"'()[]{}“”‘’*_`"
_QUOTES = str.maketrans("’‘", "''")


def _lexicon(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Never the last word of a sentence, whatever follows.
_NEVER_FINAL = _lexicon("e.g i.e vs v cf al viz approx ca incl esp resp")
# Titles end no sentence when capitalised ("Ms. Lee"); in lowercase they are units ("120 ms. Next").
_TITLES = _lexicon("dr mr mrs ms mx prof sr jr st mt")
# Abbreviations that only stand before a number ("No. 5", "Jan. 3", "Fig. 2").
_BEFORE_NUMBER = _lexicon(
    "no nos nr fig figs vol p pp ch sec art op jan feb mar apr jun jul aug sep sept oct nov dec"
)
# Words that open an independent clause by themselves ("we use ...", "it's ...").
_SUBJECTS = _lexicon("i we you they he she it")
_SUBJECT_CONTRACTIONS = _lexicon(
    "i'm we're you're they're he's she's it's there's that's we've i've you've they've we'll i'll you'll "
    "they'll it'll we'd i'd they'd"
)
_FINITE = _lexicon(
    "is are was were has have had must should will would can could may might shall need needs requires require "
    "uses runs costs takes lives sits works supports expects wants prefers handles stores depends lacks includes "
    "isn't aren't wasn't weren't doesn't don't didn't can't cannot won't hasn't haven't shouldn't mustn't"
)
_QUESTION_WORDS = _lexicon(
    "what what's why how how's when where where's who who's whom whose which can could would should is are am "
    "was were do does did will shall have has isn't aren't don't doesn't didn't won't wouldn't shouldn't "
    "can't couldn't"
)
# Task verbs only: "Use TLS", "Avoid lock-in", "Keep it on-prem" state constraints, so they stay user input.
_IMPERATIVES = _lexicon(
    "find compare research summarize summarise list explain tell show give write draft create build check "
    "search look recommend suggest evaluate analyze analyse investigate review help figure estimate calculate "
    "compute propose outline describe identify design prepare send schedule book remind pick choose decide "
    "fix implement translate rank benchmark assess compile collect gather get fetch dig map sketch brainstorm "
    "document generate produce verify confirm rewrite edit refactor debug walk reply respond order buy reserve "
    "email"
)
_COPULAS = _lexicon("is are was were will would should must has have had can could")
# Pronouns that point back at what the clause before named: after a comma or "and" they continue that
# claim ("We moved the API to GCP, it runs in europe-west4 now"), unless what follows is a requirement
# of its own ("Our budget is $100k, it must be self-hostable"), which a correction of the first must
# not retire with it.
_BACK_REFERENCES = _lexicon("it they it's they're it'll they'll they've it'd they'd")
_REQUIRES = _lexicon("must should cannot can't mustn't shouldn't ought")
_REQUIRES_TO = _lexicon("has have needs need got")
# "... and our budget is ...": a noun phrase opening a second clause (whose verb _opens_clause finds)
_DETERMINERS = _lexicon("our my their his her your the this that these those")
# A sentence opening with one of these leans on what follows its comma: not two statements.
_SUBORDINATORS = _lexicon(
    "if when whenever while since because as although though unless until after before once whereas so"
)

# Each comma- or "and"-separated chunk of a framing sentence must match one of these in full.
_FRAMING = re.compile(
    r"(?:hi|hey|hello|heya|hiya|howdy|yo|greetings)(?: [a-z']+)?"  # the one free word is an addressee
    r"|(?:good )?(?:morning|afternoon|evening|day)(?: all| everyone| team| folks)?"
    r"|(?:thanks|thank you|thx|ty|tysm|cheers|many thanks|much appreciated|appreciate it|appreciated)"
    r"(?: so much| very much| a lot| a ton| again| all| everyone| team| both)*(?: for (?:the|your|all the|"
    r"all your|this|that) (?:help|updates?|answers?|reply|response|info|summary|work|input|context))?(?: [a-z]+)?"
    r"|(?:ok|okay|k|kk|cool|great|awesome|perfect|nice|excellent|wonderful|fantastic|brilliant|lovely|neat|sweet|"
    r"amazing|good|very good|all good|got it|gotcha|understood|noted|roger|roger that|will do|no problem|no worries|"
    r"np|sure|sure thing|alright|all right|right|fair enough|makes sense|that makes sense|that helps|good to know|"
    r"i see|ah|oh|hmm|wow|yay|(?:that )?(?:sounds|looks) (?:good|great|perfect|fine|right)|that's (?:great|helpful))"
    r"|how are you(?: doing)?(?: today)?|how's it going|hope (?:you're|all is|everything is)(?: doing)? well"
    r"|new shift(?: here| taking over| starting| checking in| on)?"
    r"|(?:i'm |i am |we're |we are )?(?:taking over|back|checking in|continuing|resuming|picking "
    r"(?:(?:this|it|things) )?(?:back )?up)(?: (?:from here|now|again|today|from yesterday|from last time|"
    r"from earlier|from before|from last week|from the (?:last|previous) shift|(?:from )?where (?:we|you|i) left off))*"
    r"|let me (?:give you|share|provide|add) (?:some |a bit of |a little |more |a quick |an |the |a )?(?:context|"
    r"background|update|overview|summary|recap|details|info)|let me (?:fill you in|catch you up|explain|recap)"
    r"|(?:here(?:'s| is| are) )?(?:just |a |an |some |the |my |our |more |next |one more |a bit of |a few )*"
    r"(?:quick |short |brief |small |latest |status |new |current |important |additional )*(?:updates?|context|"
    r"background|summary|recap|overview|details|notes?|info|information|heads up|questions?|things?|situation|"
    r"constraints|requirements|status)"
    r"|for context|for reference|fyi|just fyi|btw|by the way|one more thing|one last thing|also|so|anyway"
    r"|to catch you up|to give you (?:some )?context"
    # what the user thinks of the help itself, which states nothing about them: "This is really
    # helpful", "Your advice has been great", "I appreciate your help with this"
    r"|(?:this|that|your (?:advice|help|suggestions?|tips?|input|answers?|explanations?)|this (?:conversation|chat)|"
    r"talking (?:to|with) you|you)(?:'s|'ve| is| was| has| have| are)?(?: been)? (?:so |really |super |very |"
    r"pretty |incredibly |extremely |truly )*(?:helpful|useful|great|a (?:big |huge |great )?help|clear|"
    r"insightful|informative)(?: so far| already| indeed)*"
    r"|(?:i |i really |i truly )?appreciate (?:your|the|all your|all the) (?:help|advice|input|time|support|"
    r"suggestions|tips)(?: (?:with|on) (?:this|that|it))?"
    r"|(?:that|this|it) (?:really )?(?:helps|helped)(?: (?:a lot|so much|a ton|loads))?"
)
# Reactions in a chat: they answer what someone said and state nothing ("Yep!", "That's awesome!",
# "Congrats again!"). Only words of feeling or assent: "that's wrong" or "so expensive" says something.
_FEELING = (
    r"(?:awesome|amazing|great|cool|sweet|nice|wonderful|beautiful|lovely|fantastic|impressive|inspiring|"
    r"exciting|fun|funny|hilarious|incredible|adorable|cute|gorgeous|stunning|unfortunate|tough|sad|rough|"
    r"crazy|wild|huge|good|fair|true|brave|kind|special|cool stuff|awesome stuff|stoked|pumped|excited|proud|"
    r"happy|glad|relaxing|peaceful|fascinating|interesting|heartwarming|touching|rad|epic|neat)"
)
_INTENSIFIER = (
    r"(?:so |really |super |very |pretty |totally |absolutely |such an? |an? |that's |that is |it's )*"
)
_REACTION = re.compile(
    r"(?:yes|yeah|yep|yup|yea|wow|woah|whoa|omg|aw+|oh+|ah+|ha(?:ha)+|lol|lmao|congrats|congratulations|woo+hoo+|"
    r"hooray|agreed|totally|exactly|absolutely|definitely|indeed|true|same|same here|me too|i agree|"
    r"i totally agree|i know|i know right|for sure|of course|no way|no doubt|oh no|oof|ugh|yikes|phew|"
    r"i get it|i hear you|i understand|i hope so|hope so|fingers crossed|you've got this|you got this|"
    r"go get 'em|go for it|keep it up|keep going|you can do it|way to go|good for you|go you|well done|good job|"
    r"great job|nice job|nice one|nice work|great work|well said|you got this|hang in there|take care|talk soon|"
    r"see you|you're right|you are right|so true|that means a lot|means a lot|glad i could help|"
    r"happy to help|sounds like a plan|count me in|"
    r"see ya|bye|bye for now|good luck|love it|love that|i love it|i love that|(?:i'm |i am )?so happy for you|"
    r"(?:i'm |i am )?(?:so )?proud of you|glad (?:to hear (?:that|it)|you (?:liked|like|enjoyed|loved) it)|"
    r"(?:that's|that is|it's|it is|sounds|looks|how|so|what an?|such an?)? ?"
    + _INTENSIFIER
    + _FEELING
    + r"(?: (?:one|idea|pic|photo|news|time|moment|experience|day|thing))?)(?: again| too| indeed| then)?"
)
# An addressee beside a reaction or a greeting ("Yep, Maria!", "Congrats Caroline!"), or a name said
# alone to call someone ("John!"): one capitalised word
_ADDRESSEE = re.compile(
    r"(?!(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|January|February|March|April|May|June|"
    r"July|August|September|October|November|December|Today|Tomorrow|Tonight|Yesterday)\b)[A-Z][a-z]+"
)
_FRAMING_CHUNKS = re.compile(r"[,;:!?.]+|\s-+\s|\band\b")
_PREFIX_SEP = re.compile(r"[:,;.!?]+(?=\s)|\s[-–—]+(?=\s)|[–—]")

_LEADERS = re.compile(
    r"(?:(?:so|and|also|ok|okay|now|then|first|firstly|next|finally|lastly|additionally|anyway|btw|but|oh|"
    r"well|alright|one more thing|one last thing|last thing)\b[,:]?\s+)+"
)
_REQUEST = re.compile(
    r"(?:please|pls|plz|kindly|(?:can|could|would|will) (?:you|u|we)\b|would you mind|let's|let us|"
    r"let me know|i (?:want|need) you to|i(?:'d| would) (?:like|love|want) (?:for )?you to|help me|go ahead)"
)
_GOAL = re.compile(
    r"(?:(?:our|my|the|your|one|main|primary|overall|ultimate|end|key|big|first|next)\s+)*(?:(?:goal|aim|"
    r"objective|mission|purpose)s?\b(?:\s+\S+){0,4}?\s*(?:\bis\b|:)|(?:task|ask|question|job)\b(?:\s+\S+){0,4}?"
    r"\s*(?:\bis (?:to|whether|if|what|which|how|why|who|when|where)\b|:))"
    r"|(?:i|we)(?:'m|'re|'d|'ll| am| are| would| will)?\s+(?:really\s+|still\s+)?"
    r"(?:need|have|want|like|love|trying|got|hope|plan|aim)\s+to\s+(?:decide|choose|pick|figure out|"
    r"find out|determine|understand|evaluate|select|work out|know|learn|compare|research|assess)\b"
    r"|(?:i|we)(?:'m|'re| am| are) trying to\b|i wonder\b|(?:i|we)(?:'m|'re| am| are) (?:wondering|curious)\b"
)


def split_message(message: str) -> list[Claim]:
    """Split ``message`` into claims, in order, dropping framing; ``[]`` for blank input."""
    claims: list[Claim] = []
    blocks = _code_blocks(message)
    block = 0
    for line in _LINES.finditer(message):
        while block < len(blocks) and blocks[block][1] <= line.start():
            block += 1
        if block < len(blocks) and blocks[block][0] <= line.start():
            lo, hi = blocks[block]
            if (
                line.start() == lo and _FENCE.sub("", message[lo:hi]).strip()
            ):  # once; fences alone say nothing
                lo, hi = _strip(message, lo, hi)
                claims.append(Claim(message[lo:hi], lo, hi, "user_input"))
            continue
        start, end = _strip(message, line.start(), line.end())
        bullet = _BULLET.match(message, start, end)
        if bullet:
            start, end = _strip(message, bullet.end(), end)
        for s_start, s_end in _sentences(message, start, end):
            s_start, s_end = _strip(message, s_start, s_end)
            if s_start == s_end or is_framing(message[s_start:s_end]):
                continue
            s_start = _skip_framing_prefix(message, s_start, s_end)
            for c_start, c_end in _clauses(message, s_start, s_end):
                for p_start, p_end, kind in _statement_and_request(message, *_strip(message, c_start, c_end)):
                    text = message[p_start:p_end]
                    if text and not is_framing(text):
                        claims.append(Claim(text, p_start, p_end, kind or classify(text)))
    return claims


# a fence: up to three spaces, then three or more backticks or tildes (CommonMark's fenced code)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n\r]*", re.M)


def _code_blocks(message: str) -> list[tuple[int, int]]:
    """The (start, end) of each fenced code block of `message`, fences included, in order: from an
    opening fence to the first fence of the same character at least as long (an unclosed block runs
    to the end of the message), each starting where its opening fence's line does. Linear: one pass
    over the fences."""
    blocks: list[tuple[int, int]] = []
    opened: re.Match[str] | None = None
    for fence in _FENCE.finditer(message):
        if opened is None:
            opened = fence
        else:
            mark, run = opened.group(1)[0], len(opened.group(1))
            closing = fence.group(1)
            # a closing fence is the run alone on its line (CommonMark): an info string opens another
            if closing[0] == mark and len(closing) >= run and not fence.group(0).strip().strip(mark):
                blocks.append((opened.start(), fence.end()))
                opened = None
    if opened is not None:
        blocks.append((opened.start(), len(message.rstrip())))
    return blocks


# Where a statement hands over to a request inside one sentence: "I've added 52 sources to my
# library, so how can I organize them?". Held out of retrieval as one directive, the statement
# would be lost to recall (and to correction); cut, it is a claim and the rest stays a directive.
_REQUEST_TAIL = re.compile(
    r"(?:,|\s[-–—]|\.\.\.)\s+(?:(?:so|but|and|and so|which is why|that's why)\s+)?"
    r"(?=(?:can|could|would|will) you\b|how (?:can|do|should|would|could) (?:i|we)\b|"
    r"what(?:'s| is| would be) the best way\b|(?:i|we) (?:really )?(?:want|need|would like|'d like) "
    r"(?:to (?:make sure|know|ask|understand|learn|figure out)|help|some help|your help|advice|guidance)\b|"
    r"please\b|help me\b|any (?:tips|ideas|advice|suggestions)\b|should (?:i|we)\b|is there a way\b|"
    r"do you (?:have|know|think)\b)",
    re.IGNORECASE,
)
# A relative clause that states something inside a goal or a request: "I'm trying to speed up the
# API, which now averages 250ms".
_STATING_RELATIVE = re.compile(
    r",\s+(?=(?:which|where|who)\s+(?:is|are|was|were|has|have|had|now|recently|currently|already)\b)",
    re.IGNORECASE,
)
_MIN_STATEMENT_WORDS = 4
# ... and where a statement hands over to a question of its own: "He has never complained about the
# noise, will it affect the next shoot?", "I've never read Dune, what should I start with?". Kept
# whole, the question is a directive, held out of retrieval, and the claim it carries is lost: when
# the user later says they started the book, the block would show one side of what changed.
_QUESTION_TAIL = re.compile(
    r"(?:,|;|\s[-–—])\s+(?:(?:so|but|and)\s+)?"
    r"(?=(?:what|which|how|where|when|who|why|will|would|is|are|was|does|do|did|should|can|could|"
    r"has|have|any)\b)",
    re.IGNORECASE,
)
# what opens a supposition, not a statement: "If it rains tomorrow, should we cancel?"
_SUPPOSING = re.compile(
    r"^\W*(?:if|unless|when|whenever|whether|suppose|supposing|say|assuming|in case)\b", re.I
)


def _statement_and_request(text: str, start: int, end: int) -> list[tuple[int, int, ClaimKind | None]]:
    """A directive clause cut where a statement ends and its request (or stating relative clause)
    begins, when the statement part stands as a claim; otherwise the clause whole. A piece's kind is
    given where `classify` would misread it (a relative clause opens with "which")."""
    if start >= end or classify(text[start:end]) != "directive":
        return [(start, end, None)]
    for tail in _REQUEST_TAIL.finditer(text, start, end):
        left = _strip(text, start, tail.start())
        if len(text[left[0] : left[1]].split()) < _MIN_STATEMENT_WORDS:
            continue
        right = _strip(text, tail.end(), end)
        return [*_stating_relative(text, *left), (*right, None)]
    if text[start:end].rstrip().endswith("?"):
        for tail in _QUESTION_TAIL.finditer(text, start, end):
            left = _strip(text, start, tail.start())
            stated = text[left[0] : left[1]]
            if (
                len(stated.split()) < _MIN_STATEMENT_WORDS
                or _SUPPOSING.match(stated)
                or classify(stated) != "user_input"
            ):
                continue
            return [(*left, None), (*_strip(text, tail.end(), end), None)]
    return _stating_relative(text, start, end)


def _stating_relative(text: str, start: int, end: int) -> list[tuple[int, int, ClaimKind | None]]:
    """A goal whose relative clause states a value is a claim, whole: "which now averages 250ms" alone
    names nothing (its subject is the goal's object), so neither search nor a later correction could
    tell what it is about. A question stays whole and a directive (search recalls it by its value)."""
    if classify(text[start:end]) != "directive" or text[start:end].rstrip().endswith("?"):
        return [(start, end, None)]
    for rel in _STATING_RELATIVE.finditer(text, start, end):
        clause = text[rel.end() : end]
        if carries_a_value(clause) and len(text[start : rel.start()].split()) >= _MIN_STATEMENT_WORDS:
            return [(start, end, "user_input")]
    return [(start, end, None)]


def passage_for(message: str, claims: list[Claim]) -> str | None:
    """The message as the passage its claims were cut from (embedded once, scoring all of them), or
    None when it was not cut: a message that is one claim, verbatim, is its own passage."""
    if not claims or (len(claims) == 1 and claims[0].text == message.strip()):
        return None
    return message


def is_framing(sentence: str) -> bool:
    """Whether ``sentence`` is pure framing (greeting, thanks, acknowledgement, hand-off) with no claim.

    Text with no letter or digit at all (emoji, stray punctuation) carries no claim either.
    """
    if not any(ch.isalnum() for ch in sentence):
        return True
    # A long sentence or one with a number always says something; the caps also bound the regex work.
    if len(sentence) > 160 or any(ch.isdigit() for ch in sentence) or len(sentence.split()) > 12:
        return False
    norm = "".join(
        ch if ch.isalnum() or ch in " '-,;:!?." else " " for ch in sentence.translate(_QUOTES).lower()
    )
    chunks = [c for c in (c.strip() for c in _FRAMING_CHUNKS.split(" ".join(norm.split()))) if c]
    if not chunks:
        return False
    # "Thanks, Sam" splits the addressee off its greeting; a lone word after one is read with it.
    if all(
        _FRAMING.fullmatch(c) or (n > 0 and " " not in c and _FRAMING.fullmatch(f"{chunks[n - 1]} {c}"))
        for n, c in enumerate(chunks)
    ):
        return True
    return _reaction(sentence.translate(_QUOTES))


def _reaction(sentence: str) -> bool:
    """A reaction, maybe with its addressee ("Yep, Maria!", "That's awesome, John!"), or a name alone
    called out ("Caroline!"): what a chat partner says back, with no claim in it."""
    chunks = [c for c in (" ".join(c.split()) for c in _FRAMING_CHUNKS.split(sentence)) if c]
    reacted = False
    for chunk in chunks:
        lower = chunk.lower()
        if _REACTION.fullmatch(lower) or _FRAMING.fullmatch(lower):
            reacted = True
        elif not _ADDRESSEE.fullmatch(chunk.split(" ")[-1]) or not all(
            _REACTION.fullmatch(w) or _FRAMING.fullmatch(w) for w in lower.split(" ")[:-1]
        ):
            return False
    # a name alone is a call only when called out ("Caroline!"); "Paris." may be an answer
    return reacted or (len(chunks) == 1 and sentence.rstrip().endswith("!"))


# A request to keep a statement in mind hands the statement over: "can you remind me that it's
# rescheduled to 4:30 PM?", "please note that the API runs on GCP now", "I want you to remember that
# I'm vegetarian". Held back as a directive, an update told this way is hidden while the value it
# replaces shows. The words after "that" must read as a clause, not "remember that restaurant?".
_MEMO = re.compile(
    r"\b(?:remind (?:me|us)|note|remember|keep in mind|bear in mind|(?:don't|do not|never) forget|"
    r"make (?:a )?note|take note|be aware)(?: of the fact)?,? that\s+",
    re.IGNORECASE,
)


def _hands_over_a_statement(sentence: str) -> bool:
    for memo in _MEMO.finditer(sentence, 0, 400):
        words = [
            w.strip(_PUNCT).lower().translate(_QUOTES)
            for w in sentence[memo.end() : memo.end() + 200].split(None, 5)[:5]
        ]
        if not words:
            continue
        if (
            carries_a_value(" ".join(words))
            or words[0] in _SUBJECTS
            or words[0] in _DETERMINERS
            or any(w in _FINITE or w in _SUBJECT_CONTRACTIONS for w in words)
        ):
            return True
    return False


def classify(sentence: str) -> ClaimKind:
    """``"directive"`` for a question, a request or instruction, or a stated goal; else ``"user_input"``."""
    if _hands_over_a_statement(sentence):
        return "user_input"
    # "Please always answer in metric units" asks for every later turn, not this one: a rule that holds
    # until taken back, which a later rule may correct (memory.rules.standing)
    if is_standing_instruction(sentence):
        return "user_input"
    # The last letter, digit or punctuation mark, looking past closing quotes, brackets and emoji.
    last = next((ch for ch in reversed(sentence) if ch.isalnum() or ch in ".!?…;:,"), "")
    if last == "?":
        return "directive"
    head = _head(sentence)
    first, second, third = ([w.strip(_PUNCT) for w in head.split(None, 3)[:3]] + ["", "", ""])[:3]
    # "When we deploy, ..." ends with a period and is a statement; without one it reads as a question.
    if first in _QUESTION_WORDS and last not in ".!":
        return "directive"
    if _REQUEST.match(head):
        return "directive"
    # A goal that carries a value ("I'm trying to move the launch to May 5", "my goal is a 25-minute
    # 5K") states where things stand: a claim to recall and to correct, not a request to hold back.
    if _GOAL.match(head) and not carries_a_value(sentence):
        return "directive"
    # "Research is ongoing" and "Review meetings are weekly" start like "Review the PR": a verb right
    # after the first word or after a plural makes the first word part of a noun subject.
    if first in _IMPERATIVES and second not in _COPULAS and not (second.endswith("s") and third in _COPULAS):
        return "directive"
    return "user_input"


def carries_a_value(text: str) -> bool:
    """Whether `text` holds a number, a date, an amount or a version: any digit, the one test capture and
    search (retrieval's `~ '[0-9]'`) share for "says where things stand"."""
    return any(ch.isdigit() for ch in text)


def states_a_goal(sentence: str) -> bool:
    """Whether `sentence` opens with a goal or an attempt ("I'm trying to", "my goal is", "I need to
    decide"): what someone means to reach, not where things stand, whatever value it names."""
    return bool(_GOAL.match(_head(sentence)))


def _head(sentence: str) -> str:
    """The sentence's first 200 characters, lowercased, from its first letter or digit, past leading
    connectives ("So, ", "And also ")."""
    head = sentence[:200].translate(_QUOTES).lower()
    head = head[next((i for i, ch in enumerate(head) if ch.isalnum()), len(head)) :]
    leaders = _LEADERS.match(head)
    return head[leaders.end() :] if leaders else head


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Sentence spans of ``text[start:end]``, in one left-to-right pass."""
    depth, quoted, seg, i = 0, False, start, start
    while i < end:
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)  # a smiley or "2)" must not leave the rest of the line unsplittable
        elif ch == '"' and not (i > start and text[i - 1].isdigit()):  # 27" is inches, not a quote
            quoted = not quoted
        elif ch in "“”":
            quoted = ch == "“"
        elif ch in _TERMINALS:
            j = i
            while j < end and text[j] in _TERMINALS:
                j += 1
            k = j  # closing quotes and brackets after the punctuation belong to the sentence it ends
            while k < end and text[k] in _TRAILERS:
                if text[k] == '"' and not quoted:
                    break
                if text[k] in ")]}":
                    depth = max(0, depth - 1)
                elif text[k] in '"”':
                    quoted = False
                k += 1
            at_space = k == end or text[k].isspace()
            if at_space and not depth and not quoted and _is_boundary(text, start, i, j, k, end):
                yield seg, k
                seg = k
            i = k
            continue
        i += 1
    yield seg, end


def _is_boundary(text: str, lo: int, i: int, j: int, k: int, end: int) -> bool:
    """Whether the punctuation ``text[i:j]`` (followed by whitespace at ``k``) ends a sentence."""
    run = text[i:j]
    if "?" not in run and "!" not in run and run != ".":
        return False  # an ellipsis trails off mid-thought
    m = k
    while m < end and text[m].isspace():
        m += 1
    if m == end:
        return True
    nxt = text[m]
    if nxt.islower():
        return False  # "approx. ten", "Acme Inc. is": a sentence rarely starts in lowercase
    if run != ".":
        return True
    a, floor = i, max(lo, i - 16)
    while a > floor and not text[a - 1].isspace():
        a -= 1
    if a == floor and a > lo and not text[a - 1].isspace():
        return True  # a long token (URL, path) is not an abbreviation
    raw = text[a:i].lstrip("([{\"'“‘")
    token = raw.lower()
    if token in _NEVER_FINAL or _DOTTED.fullmatch(token + "."):
        return False
    if token in _TITLES:
        return not raw[:1].isupper()
    if len(token) == 1 and text[i - 1].isupper():
        return False  # an initial: "J. Smith"
    return not (token in _BEFORE_NUMBER and nxt.isdigit())


def _skip_framing_prefix(text: str, start: int, end: int) -> int:
    """Move ``start`` past leading framing such as ``Hi team,`` or ``Quick update:``."""
    while True:
        sep = _PREFIX_SEP.search(text, start, min(end, start + 80))
        if sep is None or not is_framing(text[start : sep.start()]):
            return start
        new, _ = _strip(text, sep.end(), end)
        if new >= end:
            return start
        start = new


def _opens_clause(tokens: list[tuple[int, int, str]], lo: int, hi: int) -> bool:
    """Whether ``tokens[lo:hi]`` open an independent clause: a subject, then a finite verb."""
    words = [w.translate(_QUOTES).strip(_PUNCT).lower() for _, _, w in tokens[lo : min(hi, lo + 6)]]
    words = [w for w in words if w]
    if not words:
        return False
    if words[0] in _SUBJECT_CONTRACTIONS or (words[0] in _SUBJECTS and len(words) >= 2):
        return True
    return any(w in _FINITE for w in words[1:6])


def _continues(tokens: list[tuple[int, int, str]], first: int) -> bool:
    """Whether the clause opening at ``tokens[first]`` only continues the claim before it: a pronoun
    that points back at it, with no requirement of its own ("it runs there now", not "it must")."""
    words = [w.translate(_QUOTES).strip(_PUNCT).lower() for _, _, w in tokens[first : first + 3]]
    if not words or words[0] not in _BACK_REFERENCES:
        return False
    verb = words[1] if len(words) > 1 else ""
    requires = verb in _REQUIRES or (verb in _REQUIRES_TO and len(words) > 2 and words[2] == "to")
    return not requires


def _clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut a sentence at ``;``, at ``, and`` / ``and also``, and at a comma before a subject
    (``..., it has to ...``) where both sides stand alone."""
    tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(text, start, end)]
    # Candidates: (left end, right start, is semicolon, index of last left token, index of first right token).
    cands: list[tuple[int, int, bool, int, int]] = []
    depth, quoted = 0, False
    for n, (_, b, tok) in enumerate(tokens):
        for ch in tok:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
            elif ch in '"“”':
                quoted = ch == "“" or (ch == '"' and not quoted)
        if depth or quoted or n + 1 >= len(tokens):
            continue
        nxt = tokens[n + 1][2].lower()
        if tok.endswith(";"):
            cands.append((b - 1, tokens[n + 1][0], True, n, n + 1))
        elif tok.endswith(",") and nxt == "and" and n + 2 < len(tokens):
            skip = 3 if tokens[n + 2][2].lower() == "also" and n + 3 < len(tokens) else 2
            if not _continues(tokens, n + skip):
                cands.append((b - 1, tokens[n + skip][0], False, n, n + skip))
        elif (
            tok.endswith(",")
            and nxt == "but"
            and n + 3 < len(tokens)
            and tokens[n + 2][2].lower().translate(_QUOTES) in _SUBJECT_CONTRACTIONS | _SUBJECTS
            and not _continues(tokens, n + 2)
        ):
            # "the budget is $100k, but we must self-host": a second statement with its own subject
            cands.append((b - 1, tokens[n + 2][0], False, n, n + 2))
        elif (
            tok.lower() == "and"
            and 0 < n < len(tokens) - 2
            and tokens[n - 1][2][-1] not in ",;"
            and nxt.translate(_QUOTES) in _SUBJECT_CONTRACTIONS | _SUBJECTS | _DETERMINERS
            and not _continues(tokens, n + 1)
        ):
            # "our budget is $100k per year and it must be self-hostable": two statements joined by a
            # bare "and", the second with a subject of its own (kept apart only where both stand alone)
            cands.append((tokens[n - 1][1], tokens[n + 1][0], False, n - 1, n + 1))
        elif (
            tok.lower() == "and" and nxt == "also" and 0 < n < len(tokens) - 2 and tokens[n - 1][2][-1] != ","
        ):
            cands.append((tokens[n - 1][1], tokens[n + 2][0], False, n - 1, n + 2))
        elif (
            tok.endswith(",")
            and nxt.translate(_QUOTES) in _SUBJECT_CONTRACTIONS | _SUBJECTS
            and tokens[0][2].lower().strip(_PUNCT) not in _SUBORDINATORS
            and not _continues(tokens, n + 1)
        ):
            # "the budget is $500 a month, it has to be self-hostable": two statements spliced by a
            # comma, each with its subject and verb; a correction of one must not retire the other
            # ("Since it rains, we stay home" is one: its first clause leans on the second)
            cands.append((b - 1, tokens[n + 1][0], False, n, n + 1))
    pieces: list[tuple[int, int]] = []
    prev, prev_tok = start, 0
    for idx, (left_end, right_start, semicolon, last_left, first_right) in enumerate(cands):
        right_last = cands[idx + 1][3] if idx + 1 < len(cands) else len(tokens) - 1
        left = _opens_clause(tokens, prev_tok, last_left + 1)
        right = _opens_clause(tokens, first_right, right_last + 1)
        if semicolon:  # ";" is a deliberate separator: a short constraint phrase may stand on either side
            left = left or last_left + 1 - prev_tok >= 3
            right = right or right_last + 1 - first_right >= 3
        if left and right:
            pieces.append((prev, left_end))
            prev, prev_tok = right_start, first_right
    pieces.append((prev, end))
    return pieces
