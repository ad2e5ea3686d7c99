"""Every option choice and default used anywhere in the package comes from one table.

The model and placement options live in ``core/options.py`` (values, defaults, rules), the daemon's
other settings in ``config/schema.py`` (the drift detectors' defaults in ``core.monitor``, which the schema
takes). This test reads the modules that take options from users (``cli/``, ``config/``, ``estimator.py``)
and the ones that do the work (``core/``, ``stream/``, ``monitors/``, ``jobs/``) and refuses literal copies:

* a tuple, list or set of two or more strings that equals, or is a subset of, an option's allowed
  values (a copied ``choices=`` list, a copied rule such as ``method not in ("stress", "l1")``);
* a literal default, of a function parameter or an argparse flag, for a name that is an option
  (``--method default="projection"``) or a setting (``--compression default="zstd"``) and equal to
  its table default, or equal to a stream sizing default (``batch_rows`` 8192, ``max_block_rows`` 4096);
* in the schema, a ``_f(...)`` field of an option of the table that restates its default.

The one statement of a table is not a copy: a module-level constant whose value *is* (the same object as) an
option's or a setting's allowed values (``core.fit.metric_map.LANDMARK_MAPS``, ``core.options.INPUTS``).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from collections.abc import Iterator
from pathlib import Path

import streamembed
from streamembed.config.schema import section_keys, sections
from streamembed.core.options import DEFAULTS, OPTIONS, STREAM_SIZING, StrOptions

PACKAGE = Path(streamembed.__file__).parent
SCANNED = ["cli", "config", "estimator.py", "estimator_inputs.py", "fitted_attributes.py", "core", "stream",
           "monitors", "jobs"]

#: Benchmark and test infrastructure inside the package (leaving it for benchmarks/ and tools/): its workloads
#: choose their own sizes.
BENCHMARKS = ("evaluation", "testing")
#: (file, the literal's strings) that coincide with an option's values but name something else, and why.
COINCIDENCES: dict[tuple[str, frozenset[str]], str] = {
    ("cli/embed.py", frozenset({"auto", "always", "never"})): "--progress (a progress bar), not directory.mmap",
}
#: Parameter names that coincide with a setting's key but name something else outside the command line and the
#: configuration, and why.
NAME_COINCIDENCES: dict[str, str] = {
    "seed": "a routine's own random seed (landmark selection, refit policy, hints), not generator.seed",
    "name": "a member's or a file's own name (a trigger's, a JSON line's), not [metric] name",
}


def _option_values() -> dict[str, frozenset[str]]:
    """Option or setting name -> its allowed strings: the option table's, then the schema's choices."""
    out = {name: frozenset(o.values) for name, o in OPTIONS.items() if isinstance(o.constraint, StrOptions)}
    for section, cls in sections().items():
        for name, (_, f) in section_keys(cls).items():
            ch = f.metadata.get("choices")
            if ch and all(isinstance(c, str) for c in ch):
                out[f"{section}.{name}"] = frozenset(ch)
    return out


def _setting_defaults() -> dict[str, object]:
    """Name -> table default: the options' and every setting's (by its key name, the last one wins on a clash)."""
    out: dict[str, object] = {}
    for cls in sections().values():
        for name, (_, f) in section_keys(cls).items():
            if f.default is not dataclasses.MISSING and not isinstance(f.default, bool):
                out.setdefault(name, f.default)
    return {**out, **{k: v for k, v in DEFAULTS.items() if v is not None}}


def _tables() -> list[object]:
    """Every option's and setting's tuple of allowed values (the objects themselves)."""
    out: list[object] = [o.values for o in OPTIONS.values() if isinstance(o.constraint, StrOptions)]
    for cls in sections().values():
        out.extend(f.metadata["choices"] for _, f in section_keys(cls).values() if f.metadata.get("choices"))
    return out


def _statements(rel: str, tree: ast.AST) -> set[int]:
    """ids of the literal nodes that *state* a table: module-level ``NAME = (...)`` whose value is one of
    :func:`_tables` (the same object), in the module ``rel``."""
    try:
        module = importlib.import_module("streamembed." + rel.removesuffix(".py").removesuffix("/__init__")
                                         .replace("/", "."))
    except ModuleNotFoundError:  # a probe (test_the_scan_finds_copies): states nothing
        return set()
    tables = _tables()
    out: set[int] = set()
    for node in getattr(tree, "body", []):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and node.value is not None and any(
                getattr(module, target.id, None) is t for t in tables):
            out.add(id(node.value))
    return out


def _files() -> Iterator[Path]:
    for entry in SCANNED:
        path = PACKAGE / entry
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _strings(node: ast.AST) -> frozenset[str] | None:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return frozenset(e.value for e in node.elts)  # type: ignore[attr-defined]
    return None


def _literal(node: ast.AST | None) -> object:
    """A constant's value (booleans and None excluded: they mean on/off/absent everywhere), else a sentinel."""
    if isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bool):
        return node.value
    return _literal


def _defaults(tree: ast.AST) -> Iterator[tuple[int, str, object]]:
    """(line, name, literal default) of every function parameter and every ``add_argument`` flag."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True),
                     *zip(a.kwonlyargs, a.kw_defaults, strict=True)]
            for arg, default in pairs:
                yield getattr(default, "lineno", node.lineno), arg.arg, _literal(default)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            longs = [f for f in flags if f.startswith("--")]
            dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else (longs or flags or ["?"])[0]
            yield node.lineno, str(dest).lstrip("-").replace("-", "_"), _literal(kw.get("default"))


def _schema_restatements(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Schema fields of a table option written with ``_f(<literal equal to the table default>, ...)``."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in DEFAULTS
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "_f" and node.value.args
                and _literal(node.value.args[0]) == DEFAULTS[node.target.id]):
            yield node.lineno, node.target.id


def literal_copies(files: list[Path] | None = None) -> list[str]:
    """``file:line: what`` for every literal copy of the table in the scanned modules."""
    values = _option_values()
    core_values = {k: v for k, v in values.items() if "." not in k}
    defaults = _setting_defaults()
    sizing = {DEFAULTS[name]: name for name in STREAM_SIZING}
    found = []
    for path in files or list(_files()):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        # the schema defines its own settings' choices; only the option table's are copies there
        table = core_values if rel == "config/schema.py" else values
        stated = _statements(rel, tree)
        user_facing = rel.split("/")[0] in ("cli", "config")
        for node in ast.walk(tree):
            strings = _strings(node)
            if strings is None or (rel, strings) in COINCIDENCES or id(node) in stated:
                continue
            owners = sorted(name for name, allowed in table.items() if strings <= allowed)
            if owners:
                found.append(f"{rel}:{node.lineno}: {sorted(strings)} copies the values of {', '.join(owners)}")
        for line, name, value in _defaults(tree):
            if value is _literal or (name in NAME_COINCIDENCES and not user_facing):
                continue
            if name in defaults and value == defaults[name]:
                found.append(f"{rel}:{line}: {name} = {value!r} restates the table default")
            elif isinstance(value, int) and value in sizing:
                found.append(f"{rel}:{line}: {name} = {value!r} restates the default of {sizing[value]}")
        if rel == "config/schema.py":
            found.extend(f"{rel}:{line}: {name} restates core.options' default (use _option)"
                         for line, name in _schema_restatements(tree))
    return sorted(set(found))


def test_no_literal_copy_of_an_option_choice_or_default() -> None:
    found = literal_copies()
    assert not found, "literal copies of the option table (take them from core.options / config.schema):\n" + \
        "\n".join(found)


def test_stream_sizing_defaults_are_stated_once() -> None:
    """No module of the package gives a ``batch_rows`` or ``max_block_rows`` parameter or flag a literal default."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in BENCHMARKS:
            continue
        for line, name, value in _defaults(ast.parse(path.read_text(), filename=str(path))):
            if name in STREAM_SIZING and value is not _literal:
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {name} = {value!r}")
    assert not found, "stream sizing defaults restated (use core.options.BATCH_ROWS / MAX_BLOCK_ROWS):\n" + \
        "\n".join(found)


def test_the_scan_finds_copies(tmp_path: Path) -> None:
    """The scanner itself: each kind of copy is found (so a clean scan means something)."""
    bad = PACKAGE / "cli" / "_scan_probe.py"  # a path inside the package, never written: parsed from tmp
    src = tmp_path / "probe.py"
    src.write_text(
        "def f(batch_rows=8192, method='projection', chunk=4096):\n"
        "    return method in ('stress', 'l1')\n"
        "def g(p):\n"
        "    p.add_argument('--correction', choices=('none', 'cailliez'), default='none')\n"
        "    p.add_argument('--compression', default='zstd')\n"
        "    p.add_argument('--landmarks-out', default='x.txt')\n"
    )
    found = literal_copies_of(src, bad)
    text = "\n".join(found)
    for what in ("batch_rows = 8192", "method = 'projection'", "chunk = 4096 restates the default of max_block_rows",
                 "['l1', 'stress'] copies the values of method", "['cailliez', 'none'] copies the values of correction",
                 "correction = 'none'", "compression = 'zstd'"):
        assert what in text, (what, found)
    assert "landmarks_out" not in text  # neither an option nor a setting: no claim


def test_the_working_layers_are_scanned(tmp_path: Path) -> None:
    """The core, the stream, the monitors and the jobs are read too (not only what takes options from users), and
    the one statement of a table in them is told from a copy: with the tables' own modules scanned, nothing is
    found, while the same literal inlined elsewhere is (test_the_scan_finds_copies)."""
    scanned = set(_files())
    for layer in ("core", "stream", "monitors", "jobs"):
        modules = set((PACKAGE / layer).rglob("*.py"))
        assert modules and modules <= scanned, layer
    stated = _statements("core/fit/metric_map.py", ast.parse((PACKAGE / "core/fit/metric_map.py").read_text()))
    assert len(stated) == 1  # LANDMARK_MAPS
    src = tmp_path / "probe.py"
    src.write_text("MAPS = ('cmds', 'smacof')\n"
                   "def f(min_shift=0.1, cooldown_seconds=300.0, seed=0):\n    return 0\n")
    text = "\n".join(literal_copies_of(src, PACKAGE / "core" / "_scan_probe.py"))
    for what in ("copies the values of landmark_map", "min_shift = 0.1", "cooldown_seconds = 300.0"):
        assert what in text, (what, text)
    assert "seed" not in text  # a routine's own seed (NAME_COINCIDENCES)


def test_every_subcommand_module_is_scanned() -> None:
    """Each module of ``cli/`` (one per subcommand) is read by the scan: a renamed folder cannot empty it silently."""
    from streamembed.cli import SUBCOMMANDS

    assert all((PACKAGE / entry).exists() for entry in SCANNED), SCANNED
    scanned = set(_files())
    modules = set((PACKAGE / "cli").rglob("*.py"))
    assert len(modules) >= len(SUBCOMMANDS) and modules <= scanned, sorted(map(str, modules - scanned))
    assert {Path(str(m.__file__)) for m in SUBCOMMANDS} <= scanned


def test_a_copied_choice_list_in_a_subcommand_is_found(tmp_path: Path) -> None:
    """The real ``cli/fit.py`` with ``--method``'s choices and default written out as literals fails the scan."""
    real = PACKAGE / "cli" / "fit.py"
    flag = 'choices=OPTIONS["method"].values, default=DEFAULTS["method"]'
    source = real.read_text()
    assert flag in source and not literal_copies([real])
    probe = tmp_path / "fit.py"
    probe.write_text(source.replace(flag, f'choices={OPTIONS["method"].values!r}, default={DEFAULTS["method"]!r}'))
    text = "\n".join(literal_copies_of(probe, real))
    assert "cli/fit.py:" in text and "copies the values of method" in text, text
    assert f"method = {DEFAULTS['method']!r} restates the table default" in text, text


def literal_copies_of(src: Path, as_path: Path) -> list[str]:
    """:func:`literal_copies` of the source ``src`` as if it were the package file ``as_path``."""
    import unittest.mock

    real = Path.read_text
    with unittest.mock.patch.object(Path, "read_text", lambda self, *a, **k: real(src if self == as_path else self,
                                                                                     *a, **k)):
        return literal_copies([as_path])


def test_every_duration_has_an_upper_bound() -> None:
    """Durations (``*_seconds``, ``*_ms``) are bounded by their field (``_s``/``_ms``), not by their name at load."""
    for section, cls in sections().items():
        for name, (_, f) in section_keys(cls).items():
            if name.endswith(("_seconds", "_ms")):
                assert f.metadata.get("max") is not None, f"{section}.{name} has no upper bound"


def test_every_numeric_setting_states_its_whole_range_on_its_field_once() -> None:
    """Every numeric field states both ends of its range, finite (``min=`` and ``max=``, the one statement of
    it); ``config.ranges.RANGES`` is that statement as a table (one entry per numeric key, nothing else, equal to
    the field's), and no other module of ``config/`` writes a range down."""
    import math

    from streamembed.config.ranges import RANGES, Range

    numeric = set()
    for section, cls in sections().items():
        for name, (tp, f) in section_keys(cls).items():
            if tp in (int, float) or f.metadata.get("words"):
                key = f"{section}.{name}"
                numeric.add(key)
                lo, hi = f.metadata.get("min"), f.metadata.get("max")
                assert lo is not None and hi is not None, f"{key} must state min= and max= on its field"
                assert math.isfinite(lo) and math.isfinite(hi) and lo <= hi, key
                assert RANGES[key] == Range(lo, hi, bool(f.metadata.get("exclusive_min")),
                                            bool(f.metadata.get("exclusive_max"))), key
                default = f.default
                if isinstance(default, (int, float)) and not isinstance(default, bool):
                    assert RANGES[key].contains(default), f"{key}: its default {default} is outside its range"
    assert set(RANGES) == numeric, sorted(set(RANGES) ^ numeric)
    ranges_src = (PACKAGE / "config" / "ranges.py").read_text()
    assert "Range(1" not in ranges_src and "Range(0" not in ranges_src, "config/ranges.py states a range itself"


def test_the_configuration_imports_nothing_above_it() -> None:
    """``config/`` sits under the stream, Kafka and daemon layers that read it (the loader used to live in
    ``daemon/`` and import ``kafka``); the one exception is a lazy import of kafka-python's settings list."""
    from .test_structure import import_graph

    above = ("stream", "kafka", "ops", "daemon", "cli", "jobs")
    # [kafka.client] names the client library's keys; kafka.client_library = "kafka-python" its assignor classes
    lazy = {("streamembed.config.checks", "streamembed.kafka.client"),
            ("streamembed.config.checks", "streamembed.kafka.libraries")}
    bad = sorted(f"{mod} -> {t}" for mod, targets in import_graph().items() if mod.startswith("streamembed.config")
                 for t in targets if t.split(".")[1] in above and (mod, t) not in lazy)
    assert not bad, bad
