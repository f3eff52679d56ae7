"""What capture stores for each kind of message: one policy for the middleware and for anything that
captures messages itself (the playground's HTTP API).

- a user's message: verbatim, split into claims, acting on the user's behalf;
- a tool's result: untrusted (source tool_result, so it never supersedes a user's fact nor plants a
  directive), clipped to a page's worth, acting on no one's behalf; nothing when it only reports that
  the tool failed (memory.rules.conclusions.is_failure_notice);
- a delegation (the task a sub-agent was given): the delegating agent's instruction, all of it a
  directive of source delegation, never the user's words nor recalled as a question of theirs;
- a final answer: one conclusion, unless it is a tool call written as text, empty or an error
  (memory.rules.conclusions), keyed by its turn so that a replay stores it once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Unpack

from memory.graph.facts import ProvenanceArgs
from memory.graph.store import FactStore
from memory.model import CaptureResult, Kind, Namespace, Source
from memory.rules.conclusions import (
    acknowledges,
    is_failure_notice,
    states_nothing,
    why_no_answer,
    without_lead_in,
)

# a tool result is captured verbatim up to this many characters: a whole web page would flood the
# namespace with claims nobody asked for
MAX_TOOL_RESULT_CHARS = 8_000

Said = Literal["user", "tool", "delegation"]


def capture_said(
    store: FactStore,
    ns: Namespace,
    text: str,
    *,
    by: Said,
    source_key: str | None = None,
    max_chars: int | Literal["store"] | None = "store",
    **provenance: Unpack[ProvenanceArgs],
) -> CaptureResult:
    """Capture what the user said (`by="user"`), what a tool returned (`by="tool"`) or the task a
    delegating agent gave a sub-agent (`by="delegation"`: the agent's words, kept as its
    instruction and never recalled as the user's); capturing under the same `source_key` again
    (default: the message id) writes nothing. Unless `provenance` says otherwise, the words are
    taken to act on the user's behalf. `max_chars`: how much of a user's message or a delegation is
    kept (FactStore.capture_message; "store": the store's own limit); a tool's result keeps at most
    MAX_TOOL_RESULT_CHARS."""
    if by == "tool" and is_failure_notice(text):
        return CaptureResult(facts=(), written=0)  # an outage is not memory
    if by == "tool":
        # a tool result is nobody's instruction
        nobodys: ProvenanceArgs = {**provenance, "acting_on_behalf_of": None}
        return store.capture_message(
            ns,
            text,
            source=Source.TOOL_RESULT,
            source_key=source_key,
            max_chars=MAX_TOOL_RESULT_CHARS,
            **nobodys,
        )
    return store.capture_message(
        ns,
        text,
        source=Source.DELEGATION if by == "delegation" else Source.PASSIVE_CAPTURE,
        source_key=source_key,
        max_chars=max_chars,
        **_for_the_user(provenance),
    )


def _for_the_user(provenance: ProvenanceArgs) -> ProvenanceArgs:
    """`provenance`, acting on the user's behalf unless it names someone (or no one) else."""
    return {"acting_on_behalf_of": "user", **provenance}


def answer_key(thread_id: str | None, asked: str | None) -> str:
    """A final answer's key: its turn (the thread and the user message it answers), not its own id,
    since a checkpoint replay regenerates the answer under a new id and must not store it twice."""
    return f"final:{thread_id}:{asked}"


def capture_answer(
    store: FactStore,
    ns: Namespace,
    text: str,
    *,
    key: str,
    tool_results: Sequence[str] = (),
    asked: str = "",
    tool_names: Iterable[str] = (),
    **provenance: Unpack[ProvenanceArgs],
) -> CaptureResult | None:
    """Capture a final answer to `asked` as a conclusion under `key`, less a lead-in that only
    announces it; None when it is no answer (memory.rules.conclusions.why_no_answer: among others, one
    that says back one of its turn's `tool_results`, which are memory's own notices or already
    captured, or that talks of the tools named `tool_names`), and None when it only acknowledges
    `asked` by saying it back (memory.rules.conclusions.acknowledges). Unless `provenance` says otherwise, the
    answer acts on the user's behalf."""
    text = without_lead_in(text)
    if why_no_answer(text, asked=asked, tool_results=tool_results, tool_names=tool_names) is not None:
        return None
    if states_nothing(text):  # an answer of one bare word may do for a reply, but states no fact
        return None
    if asked and acknowledges(text, asked):  # "Got it, your budget is $100k": the user's claim again
        return None
    return store.remember_result(
        ns,
        text,
        kind=Kind.CONCLUSION,
        source=Source.PASSIVE_CAPTURE,
        source_key=key,
        **_for_the_user(provenance),
    )


__all__ = ["MAX_TOOL_RESULT_CHARS", "Said", "answer_key", "capture_answer", "capture_said"]
