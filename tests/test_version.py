"""The version is written once, in pyproject.toml: the package reads it from the installed metadata."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import streamembed

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_the_installed_distributions() -> None:
    try:
        installed = importlib.metadata.version("streamembed")
    except importlib.metadata.PackageNotFoundError:
        installed = "0+unknown"
    assert streamembed.__version__ == installed


def test_the_version_is_unknown_when_the_package_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert streamembed._installed_version() == "0+unknown"


def test_no_module_writes_a_version_literal() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    literal = re.compile(rf"""__version__\s*=\s*["']|["']{re.escape(version)}["']""")
    copies = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "streamembed").rglob("*.py"))
              if literal.search(p.read_text())]
    assert not copies, f"a second copy of the version: {copies}"
