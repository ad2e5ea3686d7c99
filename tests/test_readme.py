"""README and docs stay true: the generated references equal what the code says, and they name what exists.

The configuration reference lives in docs/configuration.md, the metrics reference in docs/metrics.md; regenerate
both with ``python tests/test_readme.py --write``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CHANGELOG = ROOT / "CHANGELOG.md"
#: README is a front page that fits on a screen or two; everything longer is a page of docs/.
README_MAX_LINES = 250
#: Each generated reference: its marker name and the page that holds it.
PAGES = {"config-reference": DOCS / "configuration.md", "metrics-reference": DOCS / "metrics.md"}
#: What lies outside the repository (the development notes it was built from), split so this file does not match.
OUTSIDE = ("../" "shared", "MATH" ".md", "PERF" ".md")


def _sections() -> dict[str, str]:
    from streamembed.config import reference_markdown
    from streamembed.ops.metrics import reference_table

    return {"config-reference": reference_markdown(), "metrics-reference": reference_table()}


def _between(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, flags=re.S)
    assert m, f"{PAGES[name].name} has no <!-- {name}:start/end --> markers"
    return m.group(1)


def _documentation() -> str:
    """README, every page of docs/ and the changelog, as one text."""
    return "\n".join(p.read_text() for p in [README, *sorted(DOCS.glob("*.md")), CHANGELOG])


def write() -> None:
    for name, body in _sections().items():
        page = PAGES[name]
        text = page.read_text()
        old = _between(text, name)
        start = text.index(f"<!-- {name}:start -->\n") + len(f"<!-- {name}:start -->\n")
        page.write_text(text[:start] + body + text[start + len(old):])


def test_generated_tables_are_current() -> None:
    for name, body in _sections().items():
        text = PAGES[name].read_text()
        assert _between(text, name) == body, (f"{PAGES[name].name}'s {name} is stale: "
                                              "run python tests/test_readme.py --write")


def test_readme_fits_on_a_screen_or_two() -> None:
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move detail into docs/"


def test_readme_keeps_the_two_commands_at_the_top() -> None:
    """A newcomer pastes them: the first installs and runs the main job, the second runs the whole suite (.ci/run)."""
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    assert first_block, "README.md has no sh block"
    lines = first_block.group(1).splitlines()
    assert lines[1] == "pip install . && streamembed run", lines[:2]
    assert lines[3] == "bash .ci/install.sh && python3 -m pytest -n 2", lines[2:4]
    assert lines[3] in (ROOT / ".ci" / "run").read_text()


def test_the_quick_start_page_repeats_readmes_commands_exactly() -> None:
    """docs/quickstart.md shows README's two tested blocks (the top commands and "Your own data") word for word."""
    readme = README.read_text()
    blocks = re.findall(r"```sh\n(.*?)```", (DOCS / "quickstart.md").read_text(), flags=re.S)
    own = re.search(r"^## Your own data\n(.*?)(?=^## )", readme, flags=re.S | re.M)
    assert own, "README.md has no section '## Your own data'"
    sh = re.compile(r"```sh\n(.*?)```", flags=re.S)
    want = [sh.findall(readme)[0], *sh.findall(own.group(1))]
    assert blocks[: len(want)] == want


def test_readme_links_every_docs_page() -> None:
    text = README.read_text()
    for page in ("quickstart", "formats", "configuration", "metrics", "kafka", "drift", "operations", "architecture",
                 "math", "benchmarks", "evaluation", "api", "contributing"):
        assert f"](docs/{page}.md)" in text, page
    assert "](CHANGELOG.md)" in text


def test_docs_name_every_command_and_example_config() -> None:
    text = _documentation()
    r = subprocess.run([sys.executable, "-m", "streamembed", "--help"], capture_output=True, text=True, timeout=60)
    block = r.stdout.split("positional arguments:")[1].split("options:")[0]
    for cmd in re.findall(r"^    (\w+)\s", block, flags=re.M):
        assert f"streamembed {cmd}" in text, cmd
    for cfg in (ROOT / "config").glob("*.toml"):
        assert cfg.stem in text, cfg.name


def test_readme_and_docs_cite_only_what_a_clone_has() -> None:
    for path in [README, *sorted(DOCS.glob("*.md")), ROOT / "deploy" / "README.md", CHANGELOG]:
        text = path.read_text()
        for outside in OUTSIDE:
            assert outside not in text, f"{path.name} cites {outside}, which a clone does not have"
        for link in re.findall(r"\]\(([^)#]+)\)", text):
            if "://" not in link:
                assert (path.parent / link).exists(), f"{path.name} links to {link}, which does not exist"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.exit("usage: python tests/test_readme.py --write")
