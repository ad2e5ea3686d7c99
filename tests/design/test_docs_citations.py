"""What the package cites exists: every ``docs/<page>.md`` named in a module of streamembed/ is a file of docs/, and
every ``docs/math.md §x.y`` (or range ``§x–y``) is a numbered heading of docs/math.md."""

from __future__ import annotations

import re
from pathlib import Path

import streamembed

ROOT = Path(streamembed.__file__).resolve().parents[1]
PACKAGE = ROOT / "streamembed"
DOCS = ROOT / "docs"
PAGE = re.compile(r"docs/([\w./-]+?\.md)")
SECTION = re.compile(r"docs/math\.md,? §\s?(\d+(?:\.\d+)?)(?:\s?[–-]\s?(\d+(?:\.\d+)?))?")


def math_sections() -> set[str]:
    """The numbers of docs/math.md's headings: "4" for "## 4. Residuals ...", "4.5" for "### 4.5 Input ..."."""
    heads = re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", (DOCS / "math.md").read_text(), flags=re.M)
    return set(heads)


def broken_citations(text: str, pages: set[str], sections: set[str]) -> list[str]:
    """The citations in ``text`` of a docs page that does not exist or a docs/math.md section it does not have."""
    bad = [f"docs/{p}" for p in PAGE.findall(text) if p not in pages]
    for first, last in SECTION.findall(text):
        bad += [f"docs/math.md §{s}" for s in (first, last) if s and s not in sections]
    return bad


def test_the_checker_sees_a_missing_page_and_a_missing_section() -> None:
    pages, sections = {"math.md"}, {"1", "4", "4.5"}
    text = "see docs/math.md §4.5 and docs/math.md §4–4.5; not docs/nowhere.md, docs/math.md §4.2, docs/math.md §9"
    assert broken_citations(text, pages, sections) == ["docs/nowhere.md", "docs/math.md §4.2", "docs/math.md §9"]


def test_docstrings_cite_only_docs_pages_and_sections_that_exist() -> None:
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    sections = math_sections()
    assert {"1", "3.1", "4.5", "7.5"} <= sections
    bad = {str(p.relative_to(ROOT)): b for p in sorted(PACKAGE.rglob("*.py"))
           if (b := broken_citations(p.read_text(), pages, sections))}
    assert not bad, f"citations of docs that do not exist: {bad}"
