"""One token count for every arm, and the packer that keeps a window within its budget.

The count is the bundled all-MiniLM-L6-v2 WordPiece tokenizer (no download needed, unlike tiktoken),
without special tokens, truncation or padding. It is not any chat model's tokenizer, so budgets are
comparable between arms, not exact for a given model. WordPiece never joins pieces across whitespace,
so the count of lines joined by newlines is the sum of their counts: the packer relies on that.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the project's one token count (memory.context.tokens); re-exported because every arm is held to it
from memory.context.tokens import _tokenizer, count_cached, count_many, count_tokens

__all__ = ["CLIP_MARK", "Packer", "clip_to_last", "count_cached", "count_many", "count_tokens"]


CLIP_MARK = "… "


def clip_to_last(text: str, budget: int) -> str | None:
    """The end of `text` that fits in `budget` tokens (marked as clipped), or None if nothing useful fits.

    The cut is made at the start of a whole word, so re-tokenising the clipped text gives the same
    pieces; the result is checked against the budget all the same.
    """
    room = budget - count_tokens(CLIP_MARK)
    if room < 1:
        return None
    encoding = _tokenizer().encode(text, add_special_tokens=False)
    tokens, offsets = encoding.tokens, encoding.offsets
    start = max(0, len(tokens) - room)
    while start < len(tokens) and tokens[start].startswith("##"):
        start += 1
    while start < len(tokens):
        clipped = CLIP_MARK + text[offsets[start][0] :]
        if count_tokens(clipped) <= budget:
            return clipped
        start += 1
    return None


@dataclass
class Section:
    """A titled block of a window: its header costs tokens only if something lands under it."""

    title: str
    lines: list[str] = field(default_factory=list)


class Packer:
    """Fills a window line by line and never lets it exceed `budget` tokens (None: no limit)."""

    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.sections: list[Section] = []
        self.used = 0

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.used

    def section(self, title: str) -> Section:
        section = Section(title)
        self.sections.append(section)
        return section

    def cost(self, section: Section, line_tokens: int) -> int:
        """What adding a line of `line_tokens` to `section` costs, its header included if first."""
        return line_tokens + (0 if section.lines else count_tokens(section.title))

    def fits(self, section: Section, line_tokens: int) -> bool:
        remaining = self.remaining
        return remaining is None or self.cost(section, line_tokens) <= remaining

    def add(self, section: Section, line: str, line_tokens: int) -> bool:
        """Add `line` if it fits whole; returns whether it was added."""
        if not self.fits(section, line_tokens):
            return False
        self.used += self.cost(section, line_tokens)
        section.lines.append(line)
        return True

    def header_room(self, section: Section) -> int | None:
        """Tokens left for lines of `section` once its header is paid for."""
        remaining = self.remaining
        if remaining is None:
            return None
        return remaining - (0 if section.lines else count_tokens(section.title))

    def text(self) -> str:
        blocks = [s.title + "\n" + "\n".join(s.lines) for s in self.sections if s.lines]
        return "\n".join(blocks)
