"""The front door stays a guide: README.md keeps to its line budget, and every relative link in it,
in docs/ and in the experiment records lands on a file (and a heading, for a #anchor)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_LINES = 200  # the README guides; reference text is in docs/, one page a task
PAGES = sorted(
    [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("experiments/**/README.md")]
)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """The page without its code, where brackets and parentheses are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """The #anchors GitHub gives the page's headings: lowercased, punctuation dropped, spaces to
    hyphens, a repeated one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: and the like
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with this anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: {broken_links(page)}"


def test_the_readme_keeps_to_its_line_budget():
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines: move reference text to docs/"


def test_docs_has_a_page_per_task_each_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ROOT.glob("docs/*.md"):
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_a_broken_file_link_and_a_broken_anchor_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# Stops and restarts\n\n## `hf` export\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#stops-and-restarts) [ok](other.md#hf-export) [ok](#a-heading)\n"
        "# A heading\n[gone](missing.md) [wrong](other.md#stops) `[code](missing.md)`\n"
        "```\n[code](missing.md)\n```\n[web](https://example.com/x.md)\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#stops: no heading with this anchor",
    ]
