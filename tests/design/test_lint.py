"""The linters the project is held to, run as the test command runs them: ruff on the package, the tests, the
benchmarks and the test tools, mypy (strict) on the package; the rules live in
pyproject.toml."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed (pip install -e '.[test]' installs it)")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_ruff_finds_nothing() -> None:
    res = _run("ruff", "check", "--no-cache", "--output-format", "concise", "streamembed", "tests", "benchmarks",
               "tools")
    assert res.returncode == 0, f"ruff check:\n{res.stdout}{res.stderr}"


@pytest.mark.slow  # 25-60 s without a cache (.mypy_cache, load-dependent), about 2 s with one
def test_mypy_finds_nothing() -> None:
    res = _run("mypy")  # files, strictness and exclusions: [tool.mypy] in pyproject.toml
    assert res.returncode == 0, f"mypy:\n{res.stdout}{res.stderr}"
