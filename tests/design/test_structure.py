"""The package's shape: no import cycle (function-level and type-only imports included), no oversized class or
module, the numerical core free of I/O and of the layers above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import streamembed

PACKAGE = Path(streamembed.__file__).parent
MAX_CLASS_LINES = 350
MAX_MODULE_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    """module -> the streamembed modules it imports anywhere in its body (top level, functions; TYPE_CHECKING
    blocks, which never run, only with ``type_only``). ``from pkg import sub`` counts as importing ``pkg.sub``
    when that is a module, else ``pkg``."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip: set[int] = set()
        for node in ast.walk(tree):
            if not type_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for child in node.body for n in ast.walk(child))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, path.name == "__init__.py", node)
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            for t in targets:
                if t in mods and t != mod:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    # each subcommand imports what it runs inside its run(): `run` the daemon, `embed` the streaming loop
    assert "streamembed.daemon.app" in graph["streamembed.cli.run"], graph["streamembed.cli.run"]
    assert "streamembed.stream.loop" in graph["streamembed.cli.embed"], graph["streamembed.cli.embed"]


def test_the_command_line_is_the_top_layer() -> None:
    """``streamembed.cli`` sits on every other layer: nothing in the package imports it but the two ways in,
    ``__main__`` and ``entry`` (the console command: they install the daemon's signal handlers first)."""
    graph = import_graph()
    assert {"streamembed.cli", "streamembed.cli.run", "streamembed.cli.fit"} <= set(graph)
    bad = sorted(f"{m} -> {t}" for m, ts in graph.items() if not m.startswith("streamembed.cli")
                 and m not in ("streamembed.__main__", "streamembed.entry") for t in ts
                 if t.startswith("streamembed.cli"))
    assert not bad, bad


def test_no_import_cycle() -> None:
    assert _cycles(import_graph()) == []


def test_no_import_cycle_even_through_type_only_imports() -> None:
    """A cycle that only type annotations close (``estimator`` <-> ``estimator_inputs`` was one) still ties two
    modules into one idea: the functions take explicit arguments instead."""
    graph = import_graph(type_only=True)
    assert "streamembed.estimator" not in graph["streamembed.estimator_inputs"]
    assert _cycles(graph) == []


def test_package_inits_import_only_downwards() -> None:
    """An ``__init__`` may import its own subpackages and the core, never a layer above it."""
    layers = ["streamembed.core", "streamembed.stream", "streamembed.kafka", "streamembed.ops", "streamembed.daemon"]
    graph = import_graph()
    for rank, pkg in enumerate(layers):
        above = layers[rank + 1:]
        bad = {t for t in graph[pkg] if any(t == a or t.startswith(a + ".") for a in above)}
        assert not bad, f"{pkg}/__init__ imports from a layer above it: {sorted(bad)}"


def test_ops_sits_between_the_stream_and_the_daemon() -> None:
    """``ops/`` (server, metrics, map page, history, logs) imports the core and the stream, never ``daemon/`` nor the
    transports and commands above it; nothing below it (core, config, stream, kafka) imports it."""
    graph = import_graph()
    above = ("streamembed.daemon", "streamembed.kafka", "streamembed.cli", "streamembed.jobs")
    up = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith("streamembed.ops") for t in ts
                if t.startswith(above))
    assert not up, up
    below = ("streamembed.core", "streamembed.config", "streamembed.stream", "streamembed.kafka")
    down = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith(below) for t in ts
                  if t.startswith("streamembed.ops"))
    assert not down, down
    assert "streamembed.ops.server" in graph and "streamembed.ops.history" in graph


def test_the_monitors_sit_beside_the_stream() -> None:
    """``monitors/`` (drift, input consistency) imports the core and the configuration, not the streaming layer it
    watches nor anything above; nothing below it (core, config, stream, kafka) imports it: the embedder is handed
    its monitors."""
    graph = import_graph(type_only=True)
    up = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith("streamembed.monitors") for t in ts
                if t.startswith(("streamembed.stream", "streamembed.kafka", "streamembed.ops", "streamembed.daemon",
                                 "streamembed.cli", "streamembed.jobs")))
    assert not up, up
    below = ("streamembed.core", "streamembed.config", "streamembed.stream", "streamembed.kafka")
    down = sorted(f"{m} -> {t}" for m, ts in graph.items() if m.startswith(below) for t in ts
                  if t.startswith("streamembed.monitors"))
    assert not down, down


def test_the_core_does_no_io_and_imports_nothing_above_it() -> None:
    graph = import_graph()
    for mod, targets in graph.items():
        if mod.startswith("streamembed.core"):
            up = {t for t in targets if not t.startswith("streamembed.core")}
            assert not up, f"{mod} imports {sorted(up)}"
    for mod, path in _modules().items():
        if mod.startswith("streamembed.core"):
            tree = ast.parse(path.read_text())
            names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            assert not names & {"pyarrow", "kafka", "socket", "subprocess", "prometheus_client", "http"}, (mod, names)
            calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
            assert "open" not in calls, f"{mod} opens a file"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_class_over_350_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    big = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
           if isinstance(n, ast.ClassDef) and n.end_lineno - n.lineno + 1 > MAX_CLASS_LINES}
    assert not big, f"classes over {MAX_CLASS_LINES} lines: {big}"


def test_no_module_over_500_lines() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    big = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split them along their ideas): {big}"
