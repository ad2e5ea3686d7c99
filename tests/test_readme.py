"""README stays true: its generated tables equal what the code says, and it names what exists.

Regenerate the tables with ``python tests/test_readme.py --write``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: What lies outside the repository (the development notes it was built from), split so this file does not match.
OUTSIDE = ("../" "shared", "MATH" ".md", "PERF" ".md")


def _sections() -> dict[str, str]:
    from streamembed.daemon.config import reference_markdown
    from streamembed.daemon.metrics import reference_table

    return {"config-reference": reference_markdown(), "metrics-reference": reference_table()}


def _between(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, flags=re.S)
    assert m, f"README.md has no <!-- {name}:start/end --> markers"
    return m.group(1)


def write() -> None:
    text = README.read_text()
    for name, body in _sections().items():
        _between(text, name)
        text = re.sub(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)",
                      lambda m, body=body: m.group(1) + body + m.group(2),
                      text, flags=re.S)
    README.write_text(text)


def test_generated_tables_are_current() -> None:
    text = README.read_text()
    for name, body in _sections().items():
        assert _between(text, name) == body, f"README's {name} is stale: run python tests/test_readme.py --write"


def test_readme_names_every_command_and_example_config() -> None:
    text = README.read_text()
    r = subprocess.run([sys.executable, "-m", "streamembed", "--help"], capture_output=True, text=True, timeout=60)
    block = r.stdout.split("positional arguments:")[1].split("options:")[0]
    for cmd in re.findall(r"^    (\w+)\s", block, flags=re.M):
        assert f"streamembed {cmd}" in text, cmd
    for cfg in (ROOT / "config").glob("*.toml"):
        assert cfg.stem in text, cfg.name


def test_readme_and_docs_cite_only_what_a_clone_has() -> None:
    for path in [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]:
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
