"""The messages scenarios send: a deterministic conversation per chat, with a code word of its own.

The mix exercises both lanes' memory: a statement (stored), a question (answered from memory), a
correction (our lane supersedes the fact it corrects) and the question again. The code word makes
a chat's text recognisable anywhere, so a page showing another chat's code is a cross-session read.
"""

from __future__ import annotations

TOPICS = ("budget", "latency target", "storage limit", "team size", "deadline")


def code_for(i: int) -> str:
    return f"K{i:03d}Q"


def conversation(code: str, turns: int) -> list[str]:
    messages = []
    for t in range(turns):
        topic = TOPICS[(t // 4) % len(TOPICS)]
        value = 10 * (t // 4 + 1)
        step = t % 4
        if step == 0:
            messages.append(f"Project {code} has a {topic} of {value} units. It must be self-hostable.")
        elif step == 2:
            messages.append(f"Correction: project {code} has a {topic} of {value + 5} units.")
        else:
            messages.append(f"What is the {topic} of project {code}?")
    return messages
