"""The guided walkthrough: four messages that show where the two memories part ways, and a verdict.

State a constraint, ask something unrelated, correct the constraint, then ask a question that depends
on it. Each step is filled in for the user; after the fourth reply, each lane's final answer is read
for the corrected value and the stale one.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Literal

from memory.rules.conclusions import is_conclusion
from playground.db import AppPool
from playground.events import LANES


@dataclass(frozen=True, slots=True)
class Step:
    title: str
    text: str


STEPS = (
    Step("State a constraint", "Our budget is $100k per year. It must be self-hostable."),
    Step("Ask something unrelated", "What's a good name for a cat?"),
    Step("Correct the constraint", "Correction: our budget is $120k per year."),
    Step("Ask a question that depends on it", "What is our budget per year?"),
)
STALE_VALUE, CORRECTED_VALUE = "$100k", "$120k"
_STALE = re.compile(r"\$?\b100(?:k\b|,000\b|\s*thousand\b)", re.IGNORECASE)
_CORRECTED = re.compile(r"\$?\b120(?:k\b|,000\b|\s*thousand\b)", re.IGNORECASE)

Verdict = Literal["corrected", "stale", "both", "neither", "no_answer"]
VERDICT_TEXT = {
    "no_answer": "gave no answer in words (a tool call written as text, or nothing)",
    "corrected": f"used the corrected value ({CORRECTED_VALUE})",
    "stale": f"used the stale value ({STALE_VALUE})",
    "both": f"gave both the stale {STALE_VALUE} and the corrected {CORRECTED_VALUE}, without saying which holds",
    "neither": "mentioned neither value",
}


def verdict(reply: str) -> Verdict:
    # only a plain answer counts: a tool-call blob that happens to hold "$120k" corrected nothing
    if not is_conclusion(reply):
        return "no_answer"
    corrected, stale = bool(_CORRECTED.search(reply)), bool(_STALE.search(reply))
    if corrected and stale:
        return "both"
    if corrected:
        return "corrected"
    return "stale" if stale else "neither"


@dataclass(frozen=True, slots=True)
class LaneVerdict:
    lane: str
    verdict: Verdict
    reply: str

    @property
    def passed(self) -> bool:
        return self.verdict == "corrected"

    @property
    def text(self) -> str:
        return VERDICT_TEXT[self.verdict]


@dataclass(frozen=True, slots=True)
class WalkthroughView:
    chat_id: uuid.UUID
    sent: int  # how many steps have been sent (turns in the chat, at most 4)
    finished: bool  # the fourth turn is done
    verdicts: tuple[LaneVerdict, ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        return STEPS

    @property
    def next_text(self) -> str:
        """What the composer is filled in with: the next step, or nothing once all were sent."""
        return STEPS[self.sent].text if self.sent < len(STEPS) else ""


_STATE = """
SELECT t.turn_no, t.status, m.author, m.body
  FROM playground.turn_worker t LEFT JOIN playground.messages m ON m.turn_id = t.id AND m.author <> 'user'
 WHERE t.chat_id = %s AND t.turn_no <= %s
 ORDER BY t.turn_no
"""


async def load_walkthrough(pool: AppPool, chat_id: uuid.UUID) -> WalkthroughView:
    async with pool.connection() as conn:
        rows = await (await conn.execute(_STATE, (chat_id, len(STEPS)))).fetchall()
    sent = max((r["turn_no"] for r in rows), default=0)
    last = [r for r in rows if r["turn_no"] == len(STEPS)]
    finished = bool(last) and last[0]["status"] == "done"
    verdicts: tuple[LaneVerdict, ...] = ()
    if finished:
        replies = {r["author"]: r["body"] for r in last if r["author"]}
        verdicts = tuple(
            LaneVerdict(lane, verdict(replies.get(lane, "")), replies.get(lane, "")) for lane in LANES
        )
    return WalkthroughView(chat_id, sent, finished, verdicts)
