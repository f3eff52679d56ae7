"""The pages hold to the tree: every relative link in the README and the pages under docs/, results/
and bench/ reaches a file (and the heading it names, if it names one), and docs/internals/architecture.md names every module under memory/ and playground/ by its path, and no
path that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "internals" / "architecture.md"
PAGES = [
    ROOT / "README.md",
    *(p for d in ("docs", "results", "bench") for p in sorted((ROOT / d).rglob("*.md"))),
]

#: a markdown link or image: [text](target "title"), the target up to a space or the closing bracket
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
#: a span in backticks that is a path in the repository: it starts at one of its top-level folders
PATH_SPAN = re.compile(r"`((?:memory|playground|bench|tests|templates|static|results|docs)/[\w./-]*)`")
#: the modules the page need not name: package markers, vendored code, the migrations' folders
UNNAMED = re.compile(r"(^|/)(__init__\.py$|vendor/|migrations/)")


def local_targets(page: Path) -> list[str]:
    """The page's links into the repository (not web addresses), each with its anchor if it has one:
    `other.md#part`, `#part` on the page itself; links inside code blocks are code, not links."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)]


def anchors(page: Path) -> set[str]:
    """The anchors a markdown page's headings get, as GitHub writes them: lower case, punctuation
    dropped, spaces as hyphens, and -1, -2 after a repeated one."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(
        r"^#{1,6}\s+(.*?)\s*#*\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M
    ):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page: Path) -> None:
    broken = []
    for target in local_targets(page):
        path, _, anchor = target.partition("#")
        reached = page.parent / path if path else page
        if not reached.exists() or (reached.suffix == ".md" and anchor and anchor not in anchors(reached)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_link_reader_finds_links_and_headings_and_leaves_code_and_addresses(tmp_path: Path) -> None:
    page = tmp_path / "links.md"
    page.write_text(
        "# Links, and `code`: here\n\n## Twice\n\n## Twice\n\n"
        'See [a](docs/a.md#x), ![b](static/b.png "B"), [c](https://example.com), [d](#here),\n'
        "[e](<spaced/e.md>) and [mail](mailto:x@example.com).\n\n```bash\n[f](nowhere.md)\n# not a heading\n```\n",
        encoding="utf-8",
    )
    assert local_targets(page) == ["docs/a.md#x", "static/b.png", "#here", "spaced/e.md"]
    assert anchors(page) == {"links-and-code-here", "twice", "twice-1"}


def modules() -> set[str]:
    found = set()
    for package in ("memory", "playground"):
        for path in (ROOT / package).rglob("*.py"):
            name = path.relative_to(ROOT).as_posix()
            if not UNNAMED.search(name):
                found.add(name)
    return found


def test_the_architecture_page_names_every_module() -> None:
    named = set(PATH_SPAN.findall(ARCHITECTURE.read_text(encoding="utf-8")))
    missing = sorted(modules() - named)
    assert not missing, (
        f"docs/internals/architecture.md does not name {missing}: add each as a backticked path, "
        "`memory/x/y.py`, with a few words on what it holds"
    )


def test_the_architecture_page_names_only_paths_that_exist() -> None:
    named = PATH_SPAN.findall(ARCHITECTURE.read_text(encoding="utf-8"))
    assert named
    gone = sorted({p for p in named if not (ROOT / p).exists()})
    assert not gone, f"docs/internals/architecture.md names what the tree does not hold: {gone}"
