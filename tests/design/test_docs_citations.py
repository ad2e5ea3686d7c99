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


#: A repository path in prose: folders then a file with one of these suffixes (``ops/metrics.py``, ``config/x.toml``).
REPO_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.(?:py|toml|md|yml|yaml|html))\b")
#: Where a path in the docs may be relative to: the repository, the package, and its two largest layers.
BASES = ("", "streamembed/", "streamembed/core/", "streamembed/stream/", "docs/")


def missing_paths(text: str, exists: set[str]) -> list[str]:
    """The repository paths named in ``text`` that are no file of the tree (``exists``: paths relative to the root)."""
    return [p for p in REPO_PATH.findall(text) if not any(b + p in exists for b in BASES)]


def test_the_path_checker_sees_a_moved_module() -> None:
    exists = {"streamembed/ops/metrics.py", "streamembed/core/place/placer.py", "docs/math.md"}
    text = "ops/metrics.py, core/place/placer.py, streamembed/daemon/metrics.py, place/placer.py and docs/math.md"
    assert missing_paths(text, exists) == ["streamembed/daemon/metrics.py"]


def test_the_docs_name_only_files_that_exist() -> None:
    """The docs and the README name modules by path (``core/place/placer.py``): after a move, each still names a
    file of the tree (the changelog, a record of what was, is not checked)."""
    exists = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts}
    pages = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
    bad = {str(p.relative_to(ROOT)): b for p in pages if p.name != "changelog.md"
           and (b := missing_paths(p.read_text(), exists))}
    assert not bad, f"paths in the docs that are no file of the tree: {bad}"
