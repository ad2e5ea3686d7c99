"""The wheel ships the product only: its benchmarks (``benchmarks/``) and test infrastructure (``tools/``,
``tests/``) live beside the package in the source checkout, and nothing in the package reaches for them."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import setuptools

import streamembed

PACKAGE = Path(streamembed.__file__).parent
ROOT = PACKAGE.parent
OUTSIDE = ("benchmarks", "tools", "tests")


def _imported_roots(tree: ast.AST) -> set[str]:
    """Top-level names of every absolute import (function-level ones included) and of every literal
    ``importlib.import_module``/``__import__`` argument."""
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            roots.add(node.args[0].value.split(".")[0])
    return roots


def test_the_import_scan_sees_every_kind_of_import() -> None:
    tree = ast.parse("import tools.broker\ndef f():\n    from benchmarks.datasets import digits\n"
                     "    importlib.import_module('tests.poison')\n")
    assert _imported_roots(tree) >= set(OUTSIDE)


def test_nothing_in_the_package_imports_benchmarks_tools_or_tests() -> None:
    bad = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = _imported_roots(ast.parse(path.read_text(encoding="utf-8"))) & set(OUTSIDE)
        if found:
            bad[str(path.relative_to(ROOT))] = sorted(found)
    assert not bad, f"the installed package would import what the wheel does not ship: {bad}"


def test_the_package_has_no_benchmark_or_test_subpackage() -> None:
    for name in ("evaluation", "testing"):
        assert not (PACKAGE / name).exists(), f"streamembed/{name}/ belongs in benchmarks/ or tools/"
    assert not list(PACKAGE.rglob("block_reference.py")), "the brute-force block oracle belongs in tools/"


def test_the_wheel_packages_are_streamembed_only() -> None:
    """The packages setuptools puts in the wheel, found with pyproject's own ``packages.find`` settings."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    find = config["tool"]["setuptools"]["packages"]["find"]
    packages = setuptools.find_packages(where=str(ROOT), include=find.get("include", ("*",)),
                                        exclude=find.get("exclude", ()))
    assert "streamembed" in packages
    assert all(p == "streamembed" or p.startswith("streamembed.") for p in packages), packages
    assert not {p for p in packages if p.split(".")[-1] in ("evaluation", "testing", *OUTSIDE)}, packages


def test_benchmarks_and_tools_are_packages_without_path_bootstrapping() -> None:
    """``python -m benchmarks.<name>`` from the checkout's root imports this checkout; no script edits sys.path."""
    bootstrap = re.compile(r"sys\.path\s*(\.(insert|append|extend)\b|\[|\+?=)")
    for folder in ("benchmarks", "tools"):
        assert (ROOT / folder / "__init__.py").is_file(), f"{folder}/ is not a package"
        hits = [str(p.relative_to(ROOT)) for p in sorted((ROOT / folder).rglob("*.py"))
                if bootstrap.search(p.read_text(encoding="utf-8"))]
        assert not hits, f"these edit sys.path instead of being run as modules: {hits}"


def test_the_wheel_ships_the_static_assets() -> None:
    """Every file under a ``static/`` folder of the package (the map page, ``ops/static/map.html``) is package data
    in pyproject and in MANIFEST.in: a move of the folder without them would ship a daemon whose ``/map`` fails."""
    import fnmatch

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["streamembed"]
    manifest = [line.split() for line in (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()]
    trees = [(words[1], words[2:]) for words in manifest if words[:1] == ["recursive-include"]]
    assets = sorted(p for p in PACKAGE.rglob("static/*") if p.is_file())
    assert assets, "no static assets found"
    for path in assets:
        rel = path.relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} is not in pyproject's package-data {globs}"
        src = path.relative_to(ROOT).as_posix()
        assert any(src.startswith(d.rstrip("/") + "/") and any(fnmatch.fnmatch(path.name, p) for p in pats)
                   for d, pats in trees), f"{src} is not in MANIFEST.in"


def test_the_c_sources_are_in_the_sdist_only_and_the_licence_in_both() -> None:
    """The kernels' C sources (``core/csrc``) are build inputs: MANIFEST.in puts them in the sdist, the wheel takes
    only the listed package data (``include-package-data = false``); LICENSE goes in both."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools_cfg = config["tool"]["setuptools"]
    assert setuptools_cfg["include-package-data"] is False
    assert not [p for p in setuptools_cfg["package-data"]["streamembed"] if "csrc" in p or p.endswith((".c", ".h"))]
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8")
    assert "recursive-include streamembed/core/csrc *.c *.h" in manifest and "include LICENSE" in manifest
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")
    assert config["project"]["license"] == {"text": "Apache-2.0"}
